-- Updates a research run unless it has ended: appends its events (each once, by
-- key), sets fields, a first-write field and its status.
-- uses fn/append_events.lua
-- KEYS[1] run      the run's hash
-- KEYS[2] events   the run's event list
-- ARGV[1] now      ms
-- ARGV[2] status   "" keeps it
-- ARGV[3] first    a field written only where it holds nothing ("" none)
-- ARGV[4] value    its value
-- ARGV[5] n        events that follow, as key/json pairs
-- ARGV[..]         then field/value pairs
-- Returns 0 when the run has ended or does not exist, 2 when the first-write field
-- holds a value (nothing is written), else 1.

local st = redis.call('HGET', KEYS[1], 'status')
if not st or st == 'completed' or st == 'failed' or st == 'cancelled' then return 0 end
if ARGV[3] ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[3]) == 1 then return 2 end
local i = appendEvents(KEYS[1], KEYS[2], ARGV, 6, tonumber(ARGV[5]))
if #ARGV >= i then redis.call('HSET', KEYS[1], unpack(ARGV, i)) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], ARGV[3], ARGV[4]) end
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'status', ARGV[2])
  if ARGV[2] == 'completed' or ARGV[2] == 'failed' or ARGV[2] == 'cancelled' then
    redis.call('HSET', KEYS[1], 'finished', ARGV[1])
  end
end
redis.call('HSET', KEYS[1], 'updated', ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
