-- Marks a job record as counted in the per-model spend ledger and reads, the first
-- time, what its spend ledger holds.
-- KEYS[1] job  the job's hash (its ledger in it)
-- Returns {1, micro-dollars} the first time, {0} after, {-1} when the record is gone
-- (no hash is made without its TTL).

if redis.call('HEXISTS', KEYS[1], 'id') == 0 then return {-1} end
if redis.call('HSETNX', KEYS[1], 'spend_counted', '1') == 0 then return {0} end
return {1, tonumber(redis.call('HGET', KEYS[1], '$usd') or '0')}
