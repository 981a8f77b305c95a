-- Moves a reservation in the tenant's day and month to what the call really cost;
-- settling again to the same cost changes nothing.
-- uses fn/spend_entry.lua
-- KEYS[1] day       the tenant's day (its calls are in it)
-- KEYS[2] month     the tenant's month
-- KEYS[3] calls     the day's calls (the day's own hash, Keys.spendCalls)
-- ARGV[1] call      the call
-- ARGV[2] cost      micro-dollars
-- ARGV[3] searches  the searches it ran
-- Returns 0 when the call holds no reservation, else 1.

local r = redis.call('HGET', KEYS[3], ARGV[1])
if not r then return 0 end
local sep = string.find(r, ':', 1, true)
local pu, pn = tonumber(string.sub(r, 1, sep - 1)), tonumber(string.sub(r, sep + 1))
local cu, cn = tonumber(ARGV[2]), tonumber(ARGV[3])
move(KEYS[1], KEYS[2], pu, pn, cu, cn)
redis.call('HSET', KEYS[3], ARGV[1], cu .. ':' .. cn)
return 1
