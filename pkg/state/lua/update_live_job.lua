-- Sets fields of a job unless it has ended.
-- KEYS[1] job         the job's hash
-- ARGV[1] now         ms
-- ARGV[2] status      the new status, or '' to keep it
-- ARGV[3] firstfield  a field written only where it holds nothing (a hop's model
--                     answer; '' none)
-- ARGV[4] first       its value
-- ARGV[5] n           how many fields to read back (0: none)
-- ARGV[6..5+n]        those fields, the first the one that asks for them
-- ARGV[6+n..]         field/value pairs
-- Returns 1 if it wrote, 0 when the job has ended, -1 when it is gone, 2 when
-- firstfield holds another value (nothing is written); a write where the first
-- read-back field holds a value returns {1, the n fields as they were before the
-- write}.

local n = tonumber(ARGV[5])
local v = redis.call('HMGET', KEYS[1], 'status', ARGV[3], unpack(ARGV, 6, 5 + n))
local st = v[1]
if not st then return -1 end
if st == 'completed' or st == 'failed' or st == 'cancelled' then return 0 end
if ARGV[3] ~= '' and v[2] and v[2] ~= ARGV[4] then return 2 end
-- One HSET writes every field: updated, the status (and finished, for a terminal
-- one) and the given fields.
local f = {'updated', ARGV[1]}
if ARGV[2] ~= '' then
  f[#f+1] = 'status'; f[#f+1] = ARGV[2]
  if ARGV[2] == 'completed' or ARGV[2] == 'failed' or ARGV[2] == 'cancelled' then
    f[#f+1] = 'finished'; f[#f+1] = ARGV[1]
  end
end
if ARGV[3] ~= '' and not v[2] then f[#f+1] = ARGV[3]; f[#f+1] = ARGV[4] end
for i = 6 + n, #ARGV do f[#f+1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(f))
if n > 0 and v[3] and v[3] ~= '' then return {1, unpack(v, 3, 2 + n)} end
return 1
