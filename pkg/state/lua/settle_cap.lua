-- Moves a call's reservation in a ledger to its real cost.
-- KEYS[1] ledger  the ledger: a batch's (hash: usd, r:<call>) or a job's hash (its
--                 fields marked: $usd, $r:<call>)
-- ARGV[1] call    the call
-- ARGV[2] cost    micro-dollars
-- ARGV[3] mark    the ledger's fields' mark ('$' for a job's, '' for a batch's)
-- Returns 0 when the call holds no reservation, else 1.

local m = ARGV[3]
local f = m .. 'r:' .. ARGV[1]
local r = redis.call('HGET', KEYS[1], f)
if not r then return 0 end
local d = tonumber(ARGV[2]) - tonumber(r)
if d ~= 0 then
  redis.call('HINCRBY', KEYS[1], m .. 'usd', d)
  redis.call('HSET', KEYS[1], f, ARGV[2])
end
return 1
