
if redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2] .. ':0') == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'usd', ARGV[2])
redis.call('HINCRBY', KEYS[2], 'usd', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])  -- the day's calls live in it (KEYS[3])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
