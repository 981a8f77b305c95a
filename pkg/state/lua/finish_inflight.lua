-- Ends owner's claim of a search in flight: its result (if it has one) is kept for
-- the identical searches waiting on it, then the claim is freed, so a waiter that
-- finds it free reads the result (or, without one, runs the search itself).
-- KEYS[1] claim
-- KEYS[2] result
-- ARGV[1] owner
-- ARGV[2] result   "" when the search failed
-- ARGV[3] keep     how long the result is kept for waiters, ms

if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
