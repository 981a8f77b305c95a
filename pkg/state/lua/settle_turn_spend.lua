-- Sets a turn's cost in the tenant's day and month: a reservation is moved to the
-- cost, a turn with none (it lapsed, or was never made) is recorded; settling again
-- to the same cost changes nothing.
-- uses fn/spend_entry.lua
-- KEYS[1..4] as reserve_turn_spend.lua
-- ARGV[1] call      the turn
-- ARGV[2] cost      micro-dollars
-- ARGV[3] searches  the native searches it ran
-- ARGV[4] dayttl    s
-- ARGV[5] monthttl  s
-- Returns 1 when the cost is new to the ledger, else 0.

local v = redis.call('HGET', KEYS[3], ARGV[1])
local cu, cn = tonumber(ARGV[2]), tonumber(ARGV[3])
local pu, pn, pend = 0, 0, false
if v then pu, pn, pend = parse(v) end
if v and not pend then
  if pu == cu and pn == cn then return 0 end
end
move(KEYS[1], KEYS[2], pu, pn, cu, cn)
redis.call('HSET', KEYS[3], ARGV[1], cu .. ':' .. cn)
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])  -- the day's calls live in it (KEYS[3])
redis.call('EXPIRE', KEYS[2], ARGV[5])
if v and not pend then return 0 end
return 1
