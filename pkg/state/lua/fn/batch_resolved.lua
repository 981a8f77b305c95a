-- resolved(key, now) moves the batch record at key to finalizing (at now, ms) when
-- its expansion has stopped and every line with a job has an outcome. It returns 1
-- when the batch is (or was already) resolved, else 0.
local function resolved(key, now)
  if redis.call('HGET', key, 'expand_done') ~= '1' then return 0 end
  local ended = tonumber(redis.call('HGET', key, 'ended') or '0')
  local expanded = tonumber(redis.call('HGET', key, 'expanded') or '0')
  if ended < expanded then return 0 end
  local st = redis.call('HGET', key, 'status')
  if st == 'in_progress' or st == 'validating' then
    redis.call('HSET', key, 'status', 'finalizing', 'finalizing_at', now)
    return 1
  end
  if st == 'finalizing' or st == 'cancelling' then return 1 end
  return 0
end
