-- Counts a child job of a research run as ended, once: its status, the end of its
-- round, its spend moved from what the run held for it to what the run spent, and
-- its events (each once, by key).
-- uses fn/append_events.lua
-- KEYS[1] run      the run's hash
-- KEYS[2] events   the run's event list
-- ARGV[1] round    the child's round
-- ARGV[2] child    the child's job id
-- ARGV[3] status   its terminal status
-- ARGV[4] model    its model spend, micro-USD
-- ARGV[5] search   its search spend, micro-USD
-- ARGV[6] finding  the child's finding (JSON), kept as kid:<child>
-- ARGV[7] n        events that follow, as key/json pairs
-- Returns {ended, submitted} of the round ({-1, -1}: no such run).

if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, -1} end
if redis.call('HSETNX', KEYS[1], 'end:' .. ARGV[2], ARGV[3]) == 1 then
  redis.call('HINCRBY', KEYS[1], 're:' .. ARGV[1], 1)
  local held = tonumber(redis.call('HGET', KEYS[1], 'hold:' .. ARGV[2]) or '0')
  if held > 0 then
    redis.call('HDEL', KEYS[1], 'hold:' .. ARGV[2])
    redis.call('HINCRBY', KEYS[1], 'held', -held)
  end
  redis.call('HINCRBY', KEYS[1], 'spent', tonumber(ARGV[4]) + tonumber(ARGV[5]))
  redis.call('HINCRBY', KEYS[1], 'spent:model', ARGV[4])
  redis.call('HINCRBY', KEYS[1], 'spent:search', ARGV[5])
  redis.call('HSET', KEYS[1], 'kid:' .. ARGV[2], ARGV[6])
  appendEvents(KEYS[1], KEYS[2], ARGV, 8, tonumber(ARGV[7]))
end
return {tonumber(redis.call('HGET', KEYS[1], 're:' .. ARGV[1]) or '0'), tonumber(redis.call('HGET', KEYS[1], 'rs:' .. ARGV[1]) or '0')}
