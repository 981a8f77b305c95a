-- Adds an ended job to its tenant's spend per model of a day. A count of 0 is not
-- written; a job that raises one field pays one HINCRBY, one that raises more one
-- HMGET and one HSET.
-- KEYS[1] day       the tenant's spend per model of the day
-- ARGV[1] spent     what the job's spend ledger held, micro-dollars (its usage's cost
--                   counts when that is 0)
-- ARGV[2] usd       the model's usd field
-- ARGV[3] jobs      the model's jobs field
-- ARGV[4] searches  the model's searches field
-- ARGV[5] n         the job's searches
-- ARGV[6] usage     the usage's micro-dollars
-- ARGV[7] ttl       the day's TTL in seconds, 0: not now

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

countModelSpend(KEYS[1], ARGV[1], {ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]})
return 1
