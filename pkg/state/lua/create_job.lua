-- Writes a job record unless the id exists.
-- KEYS[1] job     the job's hash
-- ARGV[1] ttl     the record's lifetime, ms
-- ARGV[2..] field/value pairs
-- Returns 1 if it wrote, else 0.

if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
