-- Moves a job's webhook status (hash field "webhook") to status if its current one
-- is one of from (any, when none is given).
-- KEYS[1] job      the job's hash
-- ARGV[1] status   the new status
-- ARGV[2..] from   the statuses it may move from
-- Returns {status now, 1 if changed}; {'', 0} when the job record is gone.

if redis.call('HEXISTS', KEYS[1], 'id') == 0 then return {'', 0} end
local cur = redis.call('HGET', KEYS[1], 'webhook') or ''
if cur == ARGV[1] then return {cur, 0} end
if #ARGV > 1 then
  local ok = false
  for i = 2, #ARGV do if cur == ARGV[i] then ok = true end end
  if not ok then return {cur, 0} end
end
redis.call('HSET', KEYS[1], 'webhook', ARGV[1])
return {ARGV[1], 1}
