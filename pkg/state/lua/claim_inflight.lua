-- Claims a tenant's search in flight for owner when SET NX found it taken: owner's
-- own claim (a redelivery) stays owner's; a claim of prev (a search whose outcome is
-- no use to its waiters) is taken over; any other is left to its holder.
-- KEYS[1] claim    who runs the search (a string, expiring)
-- ARGV[1] owner    the call that would run it
-- ARGV[2] ttl      the claim's time, ms
-- ARGV[3] prev     a holder to take over from ('' none)
-- Returns {1} claimed, or {0, holder, ms left}.

local holder = redis.call('GET', KEYS[1])
if not holder or holder == ARGV[1] or holder == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
return {0, holder, redis.call('PTTL', KEYS[1])}
