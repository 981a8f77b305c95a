
local function claim(key, owner, ttl)
  if redis.call('SET', key, owner, 'NX', 'PX', ttl) then return 0 end
  local cur = redis.call('GET', key)
  if not cur or cur == owner then
    redis.call('SET', key, owner, 'PX', ttl)
    return 0
  end
  local left = redis.call('PTTL', key)
  if left < 1 then left = 1 end
  return left
end

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
