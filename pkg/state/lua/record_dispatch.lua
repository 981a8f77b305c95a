-- Writes a hop's calls and expected count once, adds its searches to the job's
-- counter only the first time, marks the chain sticky, and returns the job's status;
-- a job that has ended (or is gone) gets nothing written. One HMGET reads, one HSET
-- writes.
-- KEYS[1] job             the job's hash
-- ARGV[1] callsfield      the hop's calls field
-- ARGV[2] calls           the calls, JSON
-- ARGV[3] expectedfield   the hop's expected-count field
-- ARGV[4] n               how many results the hop expects
-- ARGV[5] searchesfield   the job's searches counter field
-- ARGV[6] searches        the hop's searches
-- ARGV[7] stickyfield     the chain's sticky field
-- Returns the job's status ("" when it is gone).

local v = redis.call('HMGET', KEYS[1], 'status', ARGV[1], ARGV[5], ARGV[7])
local st = v[1] or ''
if st == '' or st == 'completed' or st == 'failed' or st == 'cancelled' then return st end
if not v[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(v[3] or '0') + tonumber(ARGV[6]), ARGV[7], '1')
elseif v[4] ~= '1' then
  redis.call('HSET', KEYS[1], ARGV[7], '1')
end
return st
