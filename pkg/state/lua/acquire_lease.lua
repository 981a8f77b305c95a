
local now, ms = tonumber(ARGV[4]), tonumber(ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
end
redis.call('ZADD', KEYS[1], now + ms, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms + 1000 then redis.call('PEXPIRE', KEYS[1], 2 * ms + 1000) end
return 1
