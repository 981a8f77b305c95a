
local st = redis.call('HGET', KEYS[1], 'status')
if not st or st == 'completed' or st == 'failed' or st == 'expired' or st == 'cancelled' then return 0 end
local f = {'status', ARGV[1], ARGV[2], ARGV[3], 'progress_at', ARGV[3]}
for i = 5, #ARGV do f[#f+1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(f))
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
redis.call('DEL', KEYS[4])
return 1
