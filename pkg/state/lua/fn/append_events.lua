-- appendEvents(run, events, argv, i, n) appends the n events given as key/json pairs
-- from argv[i] on to the list events, each once: the run's hash run keeps each key's
-- position ("ev:<key>"). It returns the index after the last pair.
local function appendEvents(run, events, argv, i, n)
  for _ = 1, n do
    local k = 'ev:' .. argv[i]
    if redis.call('HEXISTS', run, k) == 0 then
      redis.call('HSET', run, k, redis.call('RPUSH', events, argv[i + 1]))
    end
    i = i + 2
  end
  return i
end
