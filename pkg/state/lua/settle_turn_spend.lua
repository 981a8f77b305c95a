-- Sets a turn's cost in the tenant's day and month: a reservation is moved to the
-- cost, a turn with none (it lapsed, or was never made) is recorded; settling again
-- to the same cost changes nothing. Lapsed reservations of the day are given back
-- first.
-- KEYS[1..4] as reserve_turn_spend.lua
-- ARGV[1] call      the turn
-- ARGV[2] cost      micro-dollars
-- ARGV[3] searches  the native searches it ran
-- ARGV[4] dayttl    s
-- ARGV[5] monthttl  s
-- Returns 1 when the cost is new to the ledger, else 0.

local function parse(v)
  local p, n, pend = string.match(v, '^(-?%d+):(%d+)(:?p?)$')
  return tonumber(p), tonumber(n), pend == ':p'
end
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

local function move(pu, pn, cu, cn)
  if cu ~= pu then
    redis.call('HINCRBY', KEYS[1], 'usd', cu - pu)
    redis.call('HINCRBY', KEYS[2], 'usd', cu - pu)
  end
  if cn ~= pn then
    redis.call('HINCRBY', KEYS[1], 'n', cn - pn)
    redis.call('HINCRBY', KEYS[2], 'n', cn - pn)
  end
end

local v = redis.call('HGET', KEYS[3], ARGV[1])
local cu, cn = tonumber(ARGV[2]), tonumber(ARGV[3])
local pu, pn, pend = 0, 0, false
if v then pu, pn, pend = parse(v) end
if v and not pend then
  if pu == cu and pn == cn then return 0 end
end
move(pu, pn, cu, cn)
redis.call('HSET', KEYS[3], ARGV[1], cu .. ':' .. cn)
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])  -- the day's calls live in it (KEYS[3])
redis.call('EXPIRE', KEYS[2], ARGV[5])
if v and not pend then return 0 end
return 1
