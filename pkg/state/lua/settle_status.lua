-- Overwrites a job's status with a terminal one (the event stream's record of how
-- the job ended), keeping its other fields.
-- KEYS[1] job     the job's hash
-- ARGV[1] now     ms
-- ARGV[2] status  the terminal status
-- ARGV[3] error   the error, JSON, or ''
-- Returns 0 when the job record is gone, else 1.

if redis.call('HEXISTS', KEYS[1], 'id') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'updated', ARGV[1])
if redis.call('HEXISTS', KEYS[1], 'finished') == 0 or redis.call('HGET', KEYS[1], 'finished') == '' then
  redis.call('HSET', KEYS[1], 'finished', ARGV[1])
end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'error', ARGV[3]) end
return 1
