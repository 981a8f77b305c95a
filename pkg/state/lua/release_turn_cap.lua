-- Gives a refused turn's reservation back to a ledger.
-- KEYS[1] ledger  the ledger (hash: usd, r:<call>, d:<call>)
-- ARGV[1] call    the turn

local r = redis.call('HGET', KEYS[1], 'r:' .. ARGV[1])
if not r then return 0 end
redis.call('HINCRBY', KEYS[1], 'usd', -tonumber(r))
redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1], 'd:' .. ARGV[1])
return 1
