
local function keep(key, ttl)
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, ttl) end
end

local batch = ''
if KEYS[2] then batch = redis.call('HGET', KEYS[2], 'batch') or '' end
if redis.call('HSETNX', KEYS[1], 'r:' .. ARGV[1], ARGV[2]) == 0 then return {0, batch} end
redis.call('HINCRBY', KEYS[1], 'usd', ARGV[2])
keep(KEYS[1], ARGV[3])
return {1, batch}
