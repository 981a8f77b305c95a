-- Records how a batch line ended, once: the first call counts it, every later one
-- changes nothing. When every line with a job has an outcome, an in-progress batch
-- moves to finalizing. The done hash expires with the batch record.
-- KEYS[1] batch    the batch record
-- KEYS[2] done     the lines' outcomes (hash: line -> outcome)
-- ARGV[1] line     the line's index
-- ARGV[2] outcome  how it ended
-- ARGV[3] now      ms
-- Returns {counted, resolved}; only the call that counted reports resolved, so one
-- finished job asks for finalization once.

local function resolved(now)
  if redis.call('HGET', KEYS[1], 'expand_done') ~= '1' then return 0 end
  local ended = tonumber(redis.call('HGET', KEYS[1], 'ended') or '0')
  local expanded = tonumber(redis.call('HGET', KEYS[1], 'expanded') or '0')
  if ended < expanded then return 0 end
  local st = redis.call('HGET', KEYS[1], 'status')
  if st == 'in_progress' or st == 'validating' then
    redis.call('HSET', KEYS[1], 'status', 'finalizing', 'finalizing_at', now)
    return 1
  end
  if st == 'finalizing' or st == 'cancelling' then return 1 end
  return 0
end

if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return {0, 0} end
if redis.call('HINCRBY', KEYS[1], 'ended', 1) == 1 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
if ARGV[2] == 'c' then redis.call('HINCRBY', KEYS[1], 'completed', 1)
elseif ARGV[2] == 'f' then redis.call('HINCRBY', KEYS[1], 'failed', 1) end
redis.call('HSET', KEYS[1], 'progress_at', ARGV[3])
return {1, resolved(ARGV[3])}
