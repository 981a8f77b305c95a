-- Stores a hop's model answer and its dispatched calls: save_turn.lua's writes,
-- then record_dispatch.lua's, in one HSET. An answer stored already that is not this
-- one is returned and nothing is written. A job that has ended gets the answer and
-- the first hop's flags, not the calls; one that is gone gets nothing.
-- KEYS[1] job            the job's hash
-- ARGV[1] turnfield      the hop's answer field
-- ARGV[2] turn           the answer
-- ARGV[3] first          '1' on the first hop
-- ARGV[4] sticky         the chain's sticky flag
-- ARGV[5] gp             the chain's google-preferred flag
-- ARGV[6] now            ms
-- ARGV[7] callsfield     the hop's calls field
-- ARGV[8] calls          the calls, JSON
-- ARGV[9] expectedfield  the hop's expected-count field
-- ARGV[10] n             how many results the hop expects
-- ARGV[11] searches      the hop's searches
-- Returns {status, stored turn} (status '' for a job that is gone).

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
