-- Counts a paid call against the tenant's day and month once, in dollars only (a
-- model turn is not a search).
-- KEYS[1] day    the tenant's day (its calls are in it)
-- KEYS[2] month  the tenant's month
-- KEYS[3] calls  the day's calls (the day's own hash, Keys.spendCalls)
-- ARGV[1] call   the call
-- ARGV[2] cost   micro-dollars
-- ARGV[3] dayttl    s
-- ARGV[4] monthttl  s
-- Returns 1 when counted now, else 0.

if redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2] .. ':0') == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'usd', ARGV[2])
redis.call('HINCRBY', KEYS[2], 'usd', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])  -- the day's calls live in it (KEYS[3])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
