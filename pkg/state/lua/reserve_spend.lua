-- Reserves one call's price against a tenant's day and month (reserveSpend).
-- uses fn/reserve_spend.lua
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

return reserveSpend(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]),
  {tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])}, ARGV[7], ARGV[8])
