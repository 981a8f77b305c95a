-- Stores hop h's model answer unless one is stored and returns the stored answer.
-- On the first hop it also sets the chain's flags and moves a queued job to running,
-- in the same HSET; later hops change neither. A job that is gone gets nothing
-- written: the answer is returned as if stored.
-- KEYS[1] job        the job's hash
-- ARGV[1] turnfield  the hop's answer field
-- ARGV[2] turn       the answer
-- ARGV[3] first      '1' on the first hop
-- ARGV[4] sticky     the chain's sticky flag
-- ARGV[5] gp         the chain's google-preferred flag
-- ARGV[6] now        ms
-- Returns the stored answer.

local v = redis.call('HMGET', KEYS[1], 'status', ARGV[1])
if not v[1] then return ARGV[2] end
if v[2] then
  if ARGV[3] == '1' then
    redis.call('HSET', KEYS[1], 'sticky', ARGV[4], 'gp', ARGV[5])
  end
  return v[2]
end
if ARGV[3] ~= '1' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
elseif v[1] == 'queued' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], 'sticky', ARGV[4], 'gp', ARGV[5], 'status', 'running', 'updated', ARGV[6])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], 'sticky', ARGV[4], 'gp', ARGV[5])
end
return ARGV[2]
