-- Counts a call paid without a reservation (a model turn) against the ledger in a
-- job's hash, once: a call already counted changes nothing. A ledger without a TTL
-- gets ttl; one created with its owner's TTL keeps it.
-- KEYS[1] ledger  the job's hash (ledger fields $usd, $cap, $r:<call>)
-- KEYS[2] job     optional, the job record, whose batch is returned
-- ARGV[1] call    the call
-- ARGV[2] price   micro-dollars
-- ARGV[3] ttl     ms
-- Returns {1 recorded now | 0 already, batch}.

local function keep(key, ttl)
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, ttl) end
end

local batch = ''
if KEYS[2] then batch = redis.call('HGET', KEYS[2], 'batch') or '' end
if redis.call('HSETNX', KEYS[1], '$r:' .. ARGV[1], ARGV[2]) == 0 then return {0, batch} end
redis.call('HINCRBY', KEYS[1], '$usd', ARGV[2])
keep(KEYS[1], ARGV[3])
return {1, batch}
