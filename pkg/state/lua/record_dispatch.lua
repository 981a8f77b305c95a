
local v = redis.call('HMGET', KEYS[1], 'status', ARGV[1], ARGV[5], ARGV[7])
local st = v[1] or ''
if st == '' or st == 'completed' or st == 'failed' or st == 'cancelled' then return st end
if not v[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(v[3] or '0') + tonumber(ARGV[6]), ARGV[7], '1')
elseif v[4] ~= '1' then
  redis.call('HSET', KEYS[1], ARGV[7], '1')
end
return st
