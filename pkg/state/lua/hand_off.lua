
local v = redis.call('HMGET', KEYS[1], 'id', ARGV[4], ARGV[5])
if not v[1] then return {ARGV[2], ARGV[3]} end
if v[2] and v[2] ~= ARGV[1] then return {v[2], v[3] or ''} end
redis.call('HSET', KEYS[1], ARGV[4], ARGV[2], ARGV[5], ARGV[3])
return {ARGV[2], ARGV[3]}
