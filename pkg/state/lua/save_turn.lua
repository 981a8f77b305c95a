
local v = redis.call('HMGET', KEYS[1], 'status', ARGV[1])
if not v[1] then return ARGV[2] end
if v[2] then
  if ARGV[3] == '1' then
    redis.call('HSET', KEYS[1], 'sticky', ARGV[4], 'gp', ARGV[5])
  end
  return v[2]
end
if ARGV[3] ~= '1' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
elseif v[1] == 'queued' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], 'sticky', ARGV[4], 'gp', ARGV[5], 'status', 'running', 'updated', ARGV[6])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], 'sticky', ARGV[4], 'gp', ARGV[5])
end
return ARGV[2]
