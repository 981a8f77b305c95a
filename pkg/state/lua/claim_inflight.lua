-- Claims a tenant's search in flight for owner, or reads what the identical search
-- in flight before it recorded (only for a caller that waited on one: a search that
-- finds none in flight is not answered from an old result, that is the cache's job).
-- KEYS[1] claim    who runs the search now (a string, expiring)
-- KEYS[2] result   the result its owner recorded for those waiting
-- ARGV[1] owner    the call that would run it
-- ARGV[2] ttl      the claim's time, ms
-- ARGV[3] waited   "1" when this caller found the search held before
-- Returns {1} claimed (also when owner holds it already), {0, ms left} held by
-- another, {2, result} answered by the one it waited on.

local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return {1} end
if holder then return {0, redis.call('PTTL', KEYS[1])} end
if ARGV[3] == '1' then
  local r = redis.call('GET', KEYS[2])
  if r then return {2, r} end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1}
