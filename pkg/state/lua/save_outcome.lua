-- Stores a call's outcome and records a result under its address (the first
-- recorded stays), each when given, in a job that is there and not archived (no hash
-- is made without its TTL). With a count field, the outcome is the chain's result of
-- the call: the first stored stays, and it is counted among its hop's results, its
-- place beside it, in the same HSET.
-- KEYS[1] job            the job's hash
-- ARGV[1] outcomefield   the outcome's field ('' none)
-- ARGV[2] outcome        the outcome
-- ARGV[3] recordfield    the recorded result's field ('' none)
-- ARGV[4] result         the result
-- ARGV[5] countfield     the hop's count field, or '' for a call's own state (a
--                        direct search's outcome: overwritten)
-- ARGV[6] placefield     the call's place field
-- Returns 1 when the job is there, else 0.

local v = redis.call('HMGET', KEYS[1], 'id', 'cold', ARGV[3], ARGV[1], ARGV[5])
if not v[1] or v[2] then return 0 end
local f = {}
if ARGV[1] ~= '' and (ARGV[5] == '' or not v[4]) then
  f[#f+1] = ARGV[1]; f[#f+1] = ARGV[2]
  if ARGV[5] ~= '' then
    local c = tostring(tonumber(v[5] or '0') + 1)
    f[#f+1] = ARGV[5]; f[#f+1] = c; f[#f+1] = ARGV[6]; f[#f+1] = c
  end
end
if ARGV[3] ~= '' and not v[3] then f[#f+1] = ARGV[3]; f[#f+1] = ARGV[4] end
if #f > 0 then redis.call('HSET', KEYS[1], unpack(f)) end
return 1
