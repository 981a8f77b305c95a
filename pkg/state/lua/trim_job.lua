
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

-- One read of the whole record decides and gives what stays; one DEL drops the
-- record and its stored response together before the short fields are written back.
local all = redis.call('HGETALL', KEYS[1])
local sum, sp = tonumber(ARGV[3]), tonumber(ARGV[4])
local drop, st, spent = {}, nil, '0'
local rest = {'cold', ARGV[1]}
for i = 5, 4 + sum do rest[#rest+1] = ARGV[i] end
for i = 5 + sum + sp, #ARGV do drop[ARGV[i]] = true end
for i = 1, #all, 2 do
  local f = all[i]
  if f == 'status' then st = all[i+1] end
  if f == '$usd' then spent = all[i+1] end
  if f == 'cold' then return {0} end
  -- No record field holds a ':' or starts with '$': a chain, call or ledger field
  -- written after the caller read the hash goes too.
  if not drop[f] and not string.find(f, ':', 1, true) and string.sub(f, 1, 1) ~= '$' then
    rest[#rest+1] = f; rest[#rest+1] = all[i+1]
  end
end
if st ~= 'completed' and st ~= 'failed' and st ~= 'cancelled' then return {-1} end
-- Never without a TTL: a record past its time (clocks differ) goes at once.
local ttl = math.max(tonumber(ARGV[2]), 1)
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], unpack(rest))
redis.call('PEXPIRE', KEYS[1], ttl)
if sp == 0 then return {1, tonumber(spent), 0} end
local o = 5 + sum
countModelSpend(KEYS[3], spent, {ARGV[o], ARGV[o+1], ARGV[o+2], ARGV[o+3], ARGV[o+4], ARGV[o+5]})
return {1, tonumber(spent), 1}
