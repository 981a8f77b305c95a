-- Reserves a call's price against a capped ledger. A ledger without a TTL gets ttl.
-- KEYS[1] ledger  the ledger (hash: usd, cap, r:<call>)
-- KEYS[2] job     optional, the job record, whose batch is returned
-- ARGV[1] call    the call
-- ARGV[2] price   micro-dollars
-- ARGV[3] ttl     ms
-- Returns {'ok'|'again'|'over', batch, cap}.

local batch = ''
if KEYS[2] then batch = redis.call('HGET', KEYS[2], 'batch') or '' end
local f = 'r:' .. ARGV[1]
local v = redis.call('HMGET', KEYS[1], f, 'cap', 'usd')
if v[1] then return {'again', batch, 0} end
local price = tonumber(ARGV[2])
local cap, usd = tonumber(v[2] or '-1'), tonumber(v[3] or '0')
if cap >= 0 and usd + price > cap then return {'over', batch, cap} end
redis.call('HSET', KEYS[1], 'usd', string.format('%d', usd + price), f, price)
-- A ledger with neither a cap (setSpendCap gives it its lifetime) nor spend was
-- created just now: give it one.
if not v[2] and not v[3] then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {'ok', batch, 0}
