-- Gives a deleted record's bytes back, after giving back the tenant's records past
-- their expiry.
-- KEYS[1] ledger    the tenant's storage ledger (hash: used, b:<record>)
-- KEYS[2] expiries  the tenant's records by expiry (sorted set)
-- ARGV[1] record    the record's id
-- Returns the used bytes.

local head -- the earliest expiry, as sweep left it (nil: no records)
local function sweep()
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local f = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if f[2] and tonumber(f[2]) <= now then
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 128)) do
      local b = redis.call('HGET', KEYS[1], 'b:' .. m)
      if b then
        redis.call('HINCRBY', KEYS[1], 'used', -tonumber(b))
        redis.call('HDEL', KEYS[1], 'b:' .. m)
      end
      redis.call('ZREM', KEYS[2], m)
    end
    f = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  end
  if f[2] then head = math.floor(tonumber(f[2])) end
  return now
end
-- keep makes both keys outlive the record expiring at exp (ms): they are pushed a
-- day past it when they would not, so most charges pay one PTTL for it.
local function keep(now, exp)
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 or now + left < exp + 60000 then
    redis.call('PEXPIREAT', KEYS[1], exp + 86400000)
    redis.call('PEXPIREAT', KEYS[2], exp + 86400000)
  end
end
local function first()
  return head or 0
end

sweep()
local f = 'b:' .. ARGV[1]
local b = redis.call('HGET', KEYS[1], f)
if b then
  redis.call('HINCRBY', KEYS[1], 'used', -tonumber(b))
  redis.call('HDEL', KEYS[1], f)
end
redis.call('ZREM', KEYS[2], ARGV[1])
return tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
