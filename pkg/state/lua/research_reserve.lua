-- Reserves a paid step's price against a research run's budget before it is made.
-- KEYS[1] run      the run's hash
-- ARGV[1] step     the step's name (a brain call, or a child's job id)
-- ARGV[2] price    micro-USD
-- ARGV[3] cap      the run's max_usd in micro-USD (-1: none)
-- Returns "again" when the step holds, paid or (a child) ended already, "ok" when it is reserved,
-- "over" when the cap refuses it (nothing is held then), "gone" without a run.

if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
if redis.call('HEXISTS', KEYS[1], 'hold:' .. ARGV[1]) == 1 or redis.call('HEXISTS', KEYS[1], 'paid:' .. ARGV[1]) == 1
  or redis.call('HEXISTS', KEYS[1], 'end:' .. ARGV[1]) == 1 then
  return 'again'
end
local used = tonumber(redis.call('HGET', KEYS[1], 'spent') or '0') + tonumber(redis.call('HGET', KEYS[1], 'held') or '0')
local cap = tonumber(ARGV[3])
if cap >= 0 and used + tonumber(ARGV[2]) > cap then return 'over' end
redis.call('HSET', KEYS[1], 'hold:' .. ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[1], 'held', ARGV[2])
return 'ok'
