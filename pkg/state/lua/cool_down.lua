
local left = redis.call('PTTL', KEYS[1])
if left >= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if left > 0 then return 0 end
return 1
