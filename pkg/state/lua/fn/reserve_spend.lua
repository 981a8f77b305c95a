-- reserveSpend(dk, mk, call, price, lim, dttl, mttl) reserves one call's price
-- (micro-dollars) against a tenant's day dk and month mk: every limit of lim (day's
-- usd, day's searches, month's usd, month's searches; -1: none) is checked first,
-- then all counters are raised together, so concurrent workers never overshoot a
-- budget. A call that holds a reservation already (a redelivery) reserves nothing
-- more. The call's entry lives in the day's hash; a period's counters get their
-- lifetime (dttl, mttl s) when this call made them. It returns 'ok', 'again'
-- (reserved already) or the name of the budget that refused.
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
