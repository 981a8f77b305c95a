-- Caps the ledger in a job's hash, if the job is there (no hash is made without
-- its TTL).
-- KEYS[1] job  the job's hash
-- ARGV[1] cap  micro-dollars

if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], '$cap', ARGV[1])
return 1
