
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
