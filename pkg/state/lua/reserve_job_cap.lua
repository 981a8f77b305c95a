-- Reserves a call's price against the ledger in its job's hash: one HMGET reads the
-- job's batch with the ledger, one HSET writes. Nothing is written for a job that is
-- gone (no hash is made without its TTL): {'ok', '', 0}.
-- KEYS[1] job    the job's hash (ledger fields $usd, $cap, $r:<call>)
-- ARGV[1] call   the call
-- ARGV[2] price  micro-dollars
-- Returns {'ok'|'again'|'over', batch, cap}.

local f = '$r:' .. ARGV[1]
local v = redis.call('HMGET', KEYS[1], 'id', 'batch', f, '$cap', '$usd')
if not v[1] then return {'ok', '', 0} end
local batch = v[2] or ''
if v[3] then return {'again', batch, 0} end
local price = tonumber(ARGV[2])
local cap, usd = tonumber(v[4] or '-1'), tonumber(v[5] or '0')
if cap >= 0 and usd + price > cap then return {'over', batch, cap} end
redis.call('HSET', KEYS[1], '$usd', string.format('%d', usd + price), f, price)
return {'ok', batch, 0}
