
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
