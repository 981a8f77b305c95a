-- Records how a batch line ended, once: the first call counts it, every later one
-- changes nothing. When every line with a job has an outcome, an in-progress batch
-- moves to finalizing. The done hash expires with the batch record.
-- uses fn/batch_resolved.lua
-- KEYS[1] batch    the batch record
-- KEYS[2] done     the lines' outcomes (hash: line -> outcome)
-- ARGV[1] line     the line's index
-- ARGV[2] outcome  how it ended
-- ARGV[3] now      ms
-- Returns {counted, resolved}; only the call that counted reports resolved, so one
-- finished job asks for finalization once.

if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return {0, 0} end
if redis.call('HINCRBY', KEYS[1], 'ended', 1) == 1 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
if ARGV[2] == 'c' then redis.call('HINCRBY', KEYS[1], 'completed', 1)
elseif ARGV[2] == 'f' then redis.call('HINCRBY', KEYS[1], 'failed', 1) end
redis.call('HSET', KEYS[1], 'progress_at', ARGV[3])
return {1, resolved(KEYS[1], ARGV[3])}
