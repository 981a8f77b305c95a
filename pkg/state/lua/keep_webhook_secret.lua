-- Stores a webhook secret unless one is stored.
-- KEYS[1] secret  the secret's key
-- ARGV[1] secret  the secret
-- ARGV[2] ttl     ms
-- Returns the stored secret.

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return ARGV[1] end
return redis.call('GET', KEYS[1])
