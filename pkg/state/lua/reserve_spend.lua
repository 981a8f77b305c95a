-- Reserves one call's price against a tenant's day and month: every limit is
-- checked first, then all counters are raised together, so concurrent workers never
-- overshoot a budget. A call that holds a reservation already (a redelivery)
-- reserves nothing more. The call's entry lives in the day's hash; a period's
-- counters get their lifetime when this call made them.
-- KEYS[1] day    the tenant's day (its calls are in it)
-- KEYS[2] month  the tenant's month
-- ARGV[1] call   the call
-- ARGV[2] price  micro-dollars
-- ARGV[3] dayusd      limit, micro-dollars a day (-1: none)
-- ARGV[4] daysearches limit, searches a day (-1: none)
-- ARGV[5] monthusd    limit, micro-dollars a month (-1: none)
-- ARGV[6] monthsearches limit, searches a month (-1: none)
-- ARGV[7] dayttl    s
-- ARGV[8] monthttl  s
-- Returns 'ok', 'again' (reserved already) or the name of the budget that refused.

local function reserveSpend(dk, mk, call, price, lim, dttl, mttl)
  local d = redis.call('HMGET', dk, 'usd', 'n', call)
  if d[3] then return 'again' end
  local m = redis.call('HMGET', mk, 'usd', 'n')
  local du, dn = tonumber(d[1] or '0'), tonumber(d[2] or '0')
  local mu, mn = tonumber(m[1] or '0'), tonumber(m[2] or '0')
  if lim[1] >= 0 and du + price > lim[1] then return 'usd_day' end
  if lim[2] >= 0 and dn + 1 > lim[2] then return 'searches_day' end
  if lim[3] >= 0 and mu + price > lim[3] then return 'usd_month' end
  if lim[4] >= 0 and mn + 1 > lim[4] then return 'searches_month' end
  local function int(x) return string.format('%d', x) end
  redis.call('HSET', dk, 'usd', int(du + price), 'n', int(dn + 1), call, int(price) .. ':1')
  redis.call('HSET', mk, 'usd', int(mu + price), 'n', int(mn + 1))
  if not d[1] and not d[2] then redis.call('EXPIRE', dk, dttl) end
  if not m[1] and not m[2] then redis.call('EXPIRE', mk, mttl) end
  return 'ok'
end

return reserveSpend(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]),
  {tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])}, ARGV[7], ARGV[8])
