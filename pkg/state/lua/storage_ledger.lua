-- A tenant's storage ledger: every call first gives back the tenant's records past
-- their expiry (at most 128), then does what its mode says.
-- KEYS[1] ledger    the tenant's storage ledger (hash: used, b:<record>)
-- KEYS[2] expiries  the tenant's records by expiry (sorted set)
-- ARGV[1] mode      'charge', 'release' or 'used'
-- charge: sets a record's bytes. A record that grows is refused when the growth
--   does not fit; one that shrinks always fits.
--   ARGV[2] record   the record's id
--   ARGV[3] bytes    its size
--   ARGV[4] expires  its expiry, ms
--   ARGV[5] limit    the tenant's bytes (-1: none)
--   ARGV[6] force    "1" to charge whatever the limit (the bytes are written already)
--   Returns {1 charged | 0 refused, used bytes, first expiry ms}.
-- release: gives a deleted record's bytes back.
--   ARGV[2] record   the record's id
--   Returns the used bytes.
-- used: returns {used bytes, records}.

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

local now = sweep()
if ARGV[1] == 'used' then
  return {tonumber(redis.call('HGET', KEYS[1], 'used') or '0'), redis.call('ZCARD', KEYS[2])}
end
local f = 'b:' .. ARGV[2]
if ARGV[1] == 'release' then
  local b = redis.call('HGET', KEYS[1], f)
  if b then
    redis.call('HINCRBY', KEYS[1], 'used', -tonumber(b))
    redis.call('HDEL', KEYS[1], f)
  end
  redis.call('ZREM', KEYS[2], ARGV[2])
  return tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
end
local v = redis.call('HMGET', KEYS[1], f, 'used')
local old, used = tonumber(v[1] or '0'), tonumber(v[2] or '0')
local d = tonumber(ARGV[3]) - old
local limit = tonumber(ARGV[5])
if ARGV[6] ~= '1' and d > 0 and limit >= 0 and used + d > limit then return {0, used, head or 0} end
if d ~= 0 then used = redis.call('HINCRBY', KEYS[1], 'used', d) end
redis.call('HSET', KEYS[1], f, ARGV[3])
local exp = tonumber(ARGV[4])
redis.call('ZADD', KEYS[2], exp, ARGV[2])
-- The earliest expiry moves only if this record is (or was) the earliest.
if not head or exp < head or v[1] then
  local h = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  head = h[2] and math.floor(tonumber(h[2])) or nil
end
-- Both keys outlive the record: they are pushed a day past its expiry when they
-- would not, so most charges pay one PTTL for it.
local left = redis.call('PTTL', KEYS[1])
if left < 0 or now + left < exp + 60000 then
  redis.call('PEXPIREAT', KEYS[1], exp + 86400000)
  redis.call('PEXPIREAT', KEYS[2], exp + 86400000)
end
return {1, used, head or 0}
