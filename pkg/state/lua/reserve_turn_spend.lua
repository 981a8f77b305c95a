-- Reserves a turn's worst case against the tenant's day and month, after giving
-- back the day's lapsed turn reservations (at most 64 a call).
-- uses fn/spend_entry.lua
-- KEYS[1] day      the tenant's day
-- KEYS[2] month    the tenant's month
-- KEYS[3] calls    the day's calls
-- KEYS[4] pending  the day's pending reservations (sorted set by expiry)
-- ARGV[1] call     the turn
-- ARGV[2] price    micro-dollars
-- ARGV[3] searches the native searches the turn may run
-- ARGV[4..7] limits as reserve_spend.lua's ARGV[3..6]
-- ARGV[8] dayttl    s
-- ARGV[9] monthttl  s
-- ARGV[10] ttl      the reservation's lifetime, ms
-- Returns 'ok', 'again' or the name of the budget that refused.

local function sweep()
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 64)) do
    local v = redis.call('HGET', KEYS[3], m)
    if v then
      local p, n, pend = parse(v)
      if pend then
        redis.call('HINCRBY', KEYS[1], 'usd', -p)
        redis.call('HINCRBY', KEYS[2], 'usd', -p)
        if n > 0 then
          redis.call('HINCRBY', KEYS[1], 'n', -n)
          redis.call('HINCRBY', KEYS[2], 'n', -n)
        end
        redis.call('HDEL', KEYS[3], m)
      end
    end
    redis.call('ZREM', KEYS[4], m)
  end
  return now
end

local now = sweep()
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 'again' end
local price, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local du = tonumber(redis.call('HGET', KEYS[1], 'usd') or '0')
local dn = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local mu = tonumber(redis.call('HGET', KEYS[2], 'usd') or '0')
local mn = tonumber(redis.call('HGET', KEYS[2], 'n') or '0')
local lim = {tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])}
if lim[1] >= 0 and du + price > lim[1] then return 'usd_day' end
if n > 0 and lim[2] >= 0 and dn + n > lim[2] then return 'searches_day' end
if lim[3] >= 0 and mu + price > lim[3] then return 'usd_month' end
if n > 0 and lim[4] >= 0 and mn + n > lim[4] then return 'searches_month' end
redis.call('HINCRBY', KEYS[1], 'usd', price)
redis.call('HINCRBY', KEYS[2], 'usd', price)
if n > 0 then
  redis.call('HINCRBY', KEYS[1], 'n', n)
  redis.call('HINCRBY', KEYS[2], 'n', n)
end
redis.call('HSET', KEYS[3], ARGV[1], price .. ':' .. n .. ':p')
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[10]), ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[8])  -- the day's calls live in it (KEYS[3])
redis.call('EXPIRE', KEYS[4], ARGV[8])
redis.call('EXPIRE', KEYS[2], ARGV[9])
return 'ok'
