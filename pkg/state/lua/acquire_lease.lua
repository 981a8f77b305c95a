-- Takes one of a tenant's limited leases of a kind, if fewer than limit live ones
-- are held; taking a lease the caller holds already renews it. Expired leases are
-- swept only when the semaphore looks full, and the key's lifetime is pushed out
-- only when this lease would outlive it.
-- KEYS[1] semaphore  the tenant's leases of the kind (a sorted set by expiry)
-- ARGV[1] id         the lease
-- ARGV[2] limit      how many may be held
-- ARGV[3] ttl        the lease's lifetime, ms
-- ARGV[4] now        ms
-- Returns 1 when taken, else 0.

local now, ms = tonumber(ARGV[4]), tonumber(ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
end
redis.call('ZADD', KEYS[1], now + ms, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms + 1000 then redis.call('PEXPIRE', KEYS[1], 2 * ms + 1000) end
return 1
