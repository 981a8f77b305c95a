
local v = redis.call('HMGET', KEYS[1], 'status', ARGV[1], ARGV[7], 'searches', 'sticky')
local st = v[1]
if not st then return {'', ARGV[2]} end
if v[2] and v[2] ~= ARGV[2] then return {st, v[2]} end
local f = {}
local function put(k, x) f[#f+1] = k; f[#f+1] = x end
if not v[2] then put(ARGV[1], ARGV[2]) end
local sticky = nil
if ARGV[3] == '1' then
  sticky = ARGV[4]
  put('gp', ARGV[5])
  if st == 'queued' then
    put('status', 'running'); put('updated', ARGV[6])
    st = 'running'
  end
end
if st ~= 'completed' and st ~= 'failed' and st ~= 'cancelled' then
  if not v[3] then
    put(ARGV[7], ARGV[8]); put(ARGV[9], ARGV[10])
    put('searches', tonumber(v[4] or '0') + tonumber(ARGV[11]))
  end
  sticky = '1'
end
if sticky and sticky ~= v[5] then put('sticky', sticky) end
if #f > 0 then redis.call('HSET', KEYS[1], unpack(f)) end
return {st, ARGV[2]}
