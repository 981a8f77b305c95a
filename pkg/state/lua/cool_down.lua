-- Rests a key; a longer rest already running is kept.
-- KEYS[1] cooldown  the key's cooldown
-- ARGV[1] reason    why it rests
-- ARGV[2] ttl       how long, ms
-- Returns 1 when the key was usable before.

local left = redis.call('PTTL', KEYS[1])
if left >= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if left > 0 then return 0 end
return 1
