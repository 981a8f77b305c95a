-- Reserves a turn's price against the ledger in its job's hash and notes the
-- tenant's day it is reserved in. A ledger without a TTL gets ttl.
-- KEYS[1] ledger  the job's hash (ledger fields $usd, $cap, $r:<call>, $d:<call>)
-- KEYS[2] job     the job record, whose batch is returned
-- ARGV[1] call    the turn
-- ARGV[2] price   micro-dollars
-- ARGV[3] ttl     ms
-- ARGV[4] day     the tenant's day
-- Returns {'ok'|'again'|'over', batch, cap, day}.

local function keep(key, ttl)
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, ttl) end
end

local batch = redis.call('HGET', KEYS[2], 'batch') or ''
local f = '$r:' .. ARGV[1]
if redis.call('HEXISTS', KEYS[1], f) == 1 then
  return {'again', batch, 0, redis.call('HGET', KEYS[1], '$d:' .. ARGV[1]) or ARGV[4]}
end
local price = tonumber(ARGV[2])
local cap = tonumber(redis.call('HGET', KEYS[1], '$cap') or '-1')
local usd = tonumber(redis.call('HGET', KEYS[1], '$usd') or '0')
if cap >= 0 and usd + price > cap then return {'over', batch, cap, ARGV[4]} end
redis.call('HINCRBY', KEYS[1], '$usd', price)
redis.call('HSET', KEYS[1], f, price, '$d:' .. ARGV[1], ARGV[4])
keep(KEYS[1], ARGV[3])
return {'ok', batch, 0, ARGV[4]}
