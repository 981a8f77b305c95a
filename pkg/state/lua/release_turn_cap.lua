-- Gives a refused turn's reservation back to a ledger.
-- KEYS[1] ledger  the ledger: a batch's (hash: usd, r:<call>, d:<call>) or a job's
--                 hash (its fields marked: $usd, $r:<call>, $d:<call>)
-- ARGV[1] call    the turn
-- ARGV[2] mark    the ledger's fields' mark ('$' for a job's, '' for a batch's)

local m = ARGV[2]
local r = redis.call('HGET', KEYS[1], m .. 'r:' .. ARGV[1])
if not r then return 0 end
redis.call('HINCRBY', KEYS[1], m .. 'usd', -tonumber(r))
redis.call('HDEL', KEYS[1], m .. 'r:' .. ARGV[1], m .. 'd:' .. ARGV[1])
return 1
