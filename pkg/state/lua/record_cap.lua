-- Counts a call paid without a reservation (a model turn) against a capped
-- ledger, once: a call already counted changes nothing. A ledger without a TTL gets
-- ttl; one created with its owner's TTL keeps it.
-- KEYS[1] ledger  the ledger: a batch's (hash: usd, cap, r:<call>) or a job's hash
--                 (its fields marked: $usd, $cap, $r:<call>)
-- KEYS[2] job     optional, the job record, whose batch is returned
-- ARGV[1] call    the call
-- ARGV[2] price   micro-dollars
-- ARGV[3] ttl     ms
-- ARGV[4] mark    the ledger's fields' mark ('$' for a job's, '' for a batch's)
-- Returns {1 recorded now | 0 already, batch}.

local m = ARGV[4]
local batch = ''
if KEYS[2] then batch = redis.call('HGET', KEYS[2], 'batch') or '' end
if redis.call('HSETNX', KEYS[1], m .. 'r:' .. ARGV[1], ARGV[2]) == 0 then return {0, batch} end
redis.call('HINCRBY', KEYS[1], m .. 'usd', ARGV[2])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {1, batch}
