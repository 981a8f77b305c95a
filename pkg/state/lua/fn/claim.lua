-- claim(key, owner, ttl) claims the lease at key for owner for ttl ms: a free one is
-- taken with one SET NX; a renewal by its holder, or a claim racing another holder,
-- reads the holder first. It returns 0 when owner holds the lease, else the ms the
-- holder has left.
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
