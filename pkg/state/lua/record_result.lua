-- Stores a call's result once, counts it and notes its place among its hop's
-- results; the result whose place completes the hop claims the next hop's lease for
-- the caller. A result the search worker stored already (with its count and place)
-- is not written again. What decides is read by one HMGET, or, for a caller that
-- reads the job back, one HGETALL, which the reply carries as it stands after the
-- write. Nothing is written for a job that is gone or archived.
-- uses fn/claim.lua
-- KEYS[1] job            the job's hash
-- KEYS[2] lease          the lease of hop h+1
-- ARGV[1] resultfield    the call's result field
-- ARGV[2] countfield     the hop's count field
-- ARGV[3] expectedfield  the hop's expected-count field
-- ARGV[4] result         the result
-- ARGV[5] owner          who claims the next hop
-- ARGV[6] ttl            the lease, ms
-- ARGV[7] load           '1' to read the job back
-- ARGV[8] placefield     the call's place field
-- Returns {place, expected, lease[, hash field, value, ...]}: expected is -1 before
-- dispatch; lease is -1 (not tried), 0 (held) or the ms another holder has left; a
-- job gone or archived gets {0, -1, -1} with the hash as read.

local all, id, cold, n, c, have, ci, at
if ARGV[7] == '1' then
  all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local f = all[i]
    if f == 'id' then id = all[i+1]
    elseif f == 'cold' then cold = all[i+1]
    elseif f == ARGV[3] then n = all[i+1]
    elseif f == ARGV[2] then c = all[i+1]; ci = i + 1
    elseif f == ARGV[1] then have = true
    elseif f == ARGV[8] then at = all[i+1] end
  end
else
  local v = redis.call('HMGET', KEYS[1], 'id', 'cold', ARGV[3], ARGV[2], ARGV[1], ARGV[8])
  id, cold, n, c, have, at = v[1], v[2], v[3], v[4], v[5], v[6]
end
if not id or cold then return {0, -1, -1, all} end
n = tonumber(n or '-1')
c = tonumber(c or '0')
if not have then
  c = c + 1
  at = c
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[4], ARGV[2], c, ARGV[8], c)
  if all then
    if ci then
      all[ci] = tostring(c)
    else
      all[#all+1] = ARGV[2]; all[#all+1] = tostring(c)
    end
    all[#all+1] = ARGV[1]; all[#all+1] = ARGV[4]
    all[#all+1] = ARGV[8]; all[#all+1] = tostring(c)
  end
end
at = tonumber(at or c)
local l = -1
if at == n and ARGV[5] ~= '' then
  l = claim(KEYS[2], ARGV[5], ARGV[6])
end
return {at, n, l, all}
