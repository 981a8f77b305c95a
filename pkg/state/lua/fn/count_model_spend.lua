-- countModelSpend(key, spent, a) adds an ended job to its tenant's spend per model
-- of a day (the hash at key). spent is what the job's spend ledger held,
-- micro-dollars; a is {usd field, jobs field, searches field, the job's searches,
-- its usage's micro-dollars (they count when spent is 0), the day's TTL s (0: not
-- now)}. A count of 0 is not written; a job that raises one field pays one HINCRBY,
-- one that raises more one HMGET and one HSET.
local function countModelSpend(key, spent, a)
  local usd, searches = tonumber(spent), tonumber(a[4])
  if usd == 0 then usd = tonumber(a[5]) end
  local f, d = {a[2]}, {1}
  if usd ~= 0 then f[#f+1] = a[1]; d[#d+1] = usd end
  if searches ~= 0 then f[#f+1] = a[3]; d[#d+1] = searches end
  if #f == 1 then
    redis.call('HINCRBY', key, f[1], 1)
  else
    local cur, w = redis.call('HMGET', key, unpack(f)), {}
    for i = 1, #f do
      w[#w+1] = f[i]
      w[#w+1] = string.format('%d', tonumber(cur[i] or '0') + d[i])
    end
    redis.call('HSET', key, unpack(w))
  end
  if tonumber(a[6]) > 0 then redis.call('EXPIRE', key, a[6]) end
end
