-- Moves a turn's entry in a ledger to its cost, recording it when the ledger has
-- none (a reservation given back); settling again to the same cost changes nothing.
-- A ledger without a TTL gets ttl.
-- KEYS[1] ledger  the ledger: a batch's (hash: usd, r:<call>, d:<call>) or a job's
--                 hash (its fields marked: $usd, $r:<call>, $d:<call>)
-- KEYS[2] job     optional, the job record, whose batch is returned
-- ARGV[1] call    the turn
-- ARGV[2] cost    micro-dollars
-- ARGV[3] ttl     ms
-- ARGV[4] today   the tenant's day now
-- ARGV[5] mark    the ledger's fields' mark ('$' for a job's, '' for a batch's)
-- Returns {batch, day}: the job's batch and the day the turn was reserved in.

local m = ARGV[5]
local batch = ''
if KEYS[2] then batch = redis.call('HGET', KEYS[2], 'batch') or '' end
local f = m .. 'r:' .. ARGV[1]
local r = redis.call('HGET', KEYS[1], f)
local day = redis.call('HGET', KEYS[1], m .. 'd:' .. ARGV[1]) or ARGV[4]
local d = tonumber(ARGV[2]) - tonumber(r or '0')
if d ~= 0 then redis.call('HINCRBY', KEYS[1], m .. 'usd', d) end
if not r or d ~= 0 then
  redis.call('HSET', KEYS[1], f, ARGV[2], m .. 'd:' .. ARGV[1], day)
  if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
end
return {batch, day}
