-- Settles a research run's paid step at what it cost, once: its hold is released and
-- its cost counted in the run's spend and the spend of its kind.
-- KEYS[1] run      the run's hash
-- ARGV[1] step     the step's name
-- ARGV[2] cost     micro-USD
-- ARGV[3] kind     model, search or fetch
-- Returns 1 when it settled, 0 when the step was settled before.

if redis.call('HSETNX', KEYS[1], 'paid:' .. ARGV[1], ARGV[2]) == 0 then return 0 end
local held = tonumber(redis.call('HGET', KEYS[1], 'hold:' .. ARGV[1]) or '0')
if held > 0 then
  redis.call('HDEL', KEYS[1], 'hold:' .. ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'held', -held)
end
redis.call('HINCRBY', KEYS[1], 'spent', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'spent:' .. ARGV[3], ARGV[2])
return 1
