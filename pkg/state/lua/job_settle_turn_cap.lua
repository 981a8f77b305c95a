-- Moves a turn's entry in the ledger in a job's hash to its cost, recording it
-- when the ledger has none (a reservation given back); settling again to the same
-- cost changes nothing. A ledger without a TTL gets ttl.
-- KEYS[1] ledger  the job's hash (ledger fields $usd, $r:<call>, $d:<call>)
-- KEYS[2] job     optional, the job record, whose batch is returned
-- ARGV[1] call    the turn
-- ARGV[2] cost    micro-dollars
-- ARGV[3] ttl     ms
-- ARGV[4] today   the tenant's day now
-- Returns {batch, day}: the job's batch and the day the turn was reserved in.

local function keep(key, ttl)
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, ttl) end
end

local batch = ''
if KEYS[2] then batch = redis.call('HGET', KEYS[2], 'batch') or '' end
local f = '$r:' .. ARGV[1]
local r = redis.call('HGET', KEYS[1], f)
local day = redis.call('HGET', KEYS[1], '$d:' .. ARGV[1]) or ARGV[4]
local d = tonumber(ARGV[2]) - tonumber(r or '0')
if d ~= 0 then redis.call('HINCRBY', KEYS[1], '$usd', d) end
if not r or d ~= 0 then
  redis.call('HSET', KEYS[1], f, ARGV[2], '$d:' .. ARGV[1], day)
  keep(KEYS[1], ARGV[3])
end
return {batch, day}
