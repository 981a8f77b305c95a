-- Records that a batch's lines below cursor are expanded and, when done is "1",
-- that expansion has stopped; a validating batch becomes in_progress. When every
-- line with a job has an outcome, an in-progress batch moves to finalizing.
-- uses fn/batch_resolved.lua
-- KEYS[1] batch   the batch record
-- ARGV[1] cursor  lines below it are expanded
-- ARGV[2] done    "1" when expansion has stopped
-- ARGV[3] now     ms
-- Returns 1 when this call resolved the batch (the caller finalizes it), else 0.

if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'status') == 'validating' then
  redis.call('HSET', KEYS[1], 'status', 'in_progress', 'in_progress_at', ARGV[3])
end
local cur = tonumber(redis.call('HGET', KEYS[1], 'expanded') or '0')
if tonumber(ARGV[1]) > cur then redis.call('HSET', KEYS[1], 'expanded', ARGV[1]) end
redis.call('HSET', KEYS[1], 'progress_at', ARGV[3])
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'expand_done', '1')
  return resolved(KEYS[1], ARGV[3])
end
return 0
