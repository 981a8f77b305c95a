
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
