
local function claim(key, owner, ttl)
  if redis.call('SET', key, owner, 'NX', 'PX', ttl) then return 0 end
  local cur = redis.call('GET', key)
  if not cur or cur == owner then
    redis.call('SET', key, owner, 'PX', ttl)
    return 0
  end
  local left = redis.call('PTTL', key)
  if left < 1 then left = 1 end
  return left
end
return claim(KEYS[1], ARGV[1], ARGV[2])