-- Frees a lease held by owner; one held by another is left alone.
-- KEYS[1] lease  the lease
-- ARGV[1] owner  who holds it
-- Returns 1 when deleted, else 0.

if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
