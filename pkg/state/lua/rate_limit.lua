-- Takes one request from a limiter shared by every worker (the generic cell rate
-- algorithm: the key holds the theoretical arrival time).
-- KEYS[1] limiter  the limiter
-- ARGV[1] period   ms per request
-- ARGV[2] burst    requests that may go at once
-- Returns 0 when allowed, else the ms to wait.

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local emission = tonumber(ARGV[1])
local tolerance = emission * (tonumber(ARGV[2]) - 1)
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat - tolerance
if now < allow_at then return math.ceil(allow_at - now) end
local new_tat = tat + emission
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil(new_tat - now) + 1000)
return 0
