-- Deletes one item of a conversation.
-- KEYS[1] conv   the conversation's hash (n, bytes)
-- KEYS[2] items  its items by id (hash)
-- KEYS[3] order  its item ids by position (sorted set)
-- ARGV[1] item   the item's id
-- ARGV[2] ttl    ms every key lives from this write
-- Returns {1 deleted | 0 no conversation | -1 no such item, items held, bytes of items}.

if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0, 0} end
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then
  local h = redis.call('HMGET', KEYS[1], 'n', 'bytes')
  return {-1, tonumber(h[1] or '0'), tonumber(h[2] or '0')}
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local n = redis.call('HINCRBY', KEYS[1], 'n', -1)
local bytes = redis.call('HINCRBY', KEYS[1], 'bytes', -(#ARGV[1] + #v))
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return {1, n, bytes}
