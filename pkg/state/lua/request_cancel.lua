-- Moves a batch that has not ended (and is not finalizing) to cancelling.
-- KEYS[1] batch  the batch record
-- ARGV[1] now    ms
-- Returns the status after.

local st = redis.call('HGET', KEYS[1], 'status')
if not st then return '' end
if st == 'validating' or st == 'in_progress' then
  redis.call('HSET', KEYS[1], 'status', 'cancelling', 'cancelling_at', ARGV[1], 'progress_at', ARGV[1])
  return 'cancelling'
end
return st
