-- Adds items to a conversation (creating it first, in create mode), in order, each
-- once: an item whose id the conversation holds already is left as it is. With a
-- guard (a response's name), the items are added only the first time that guard is
-- given, so a response's turn is added once however often it is handed in.
-- KEYS[1] conv      the conversation's hash (id, tenant, created, metadata, n, bytes, seq, guards)
-- KEYS[2] items     its items by id (hash)
-- KEYS[3] order     its item ids by position (sorted set)
-- ARGV[1] mode      "create" or "add"
-- ARGV[2] ttl       ms every key lives from this write
-- ARGV[3] max       the items a conversation may hold
-- ARGV[4] guard     hash field naming what adds the items ("" none)
-- ARGV[5] metadata  JSON object to set ("" keep)
-- ARGV[6] tenant    (create) its tenant
-- ARGV[7] created   (create) ms
-- ARGV[8] id        (create) its id
-- ARGV[9..] item id, item JSON, ...
-- Returns {1 added | 0 no conversation | -1 exists (create) | -2 too many items |
-- 2 guard given before, items held, bytes of items}.

if ARGV[1] == 'create' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return {-1, 0, 0} end
  redis.call('HSET', KEYS[1], 'id', ARGV[8], 'tenant', ARGV[6], 'created', ARGV[7], 'metadata', '{}', 'n', 0, 'bytes', 0, 'seq', 0)
elseif redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0, 0}
end
local v = redis.call('HMGET', KEYS[1], 'n', 'bytes')
local n, bytes = tonumber(v[1] or '0'), tonumber(v[2] or '0')
if ARGV[4] ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[4]) == 1 then return {2, n, bytes} end
local adds = (#ARGV - 8) / 2
if n + adds > tonumber(ARGV[3]) then return {-2, n, bytes} end
for i = 9, #ARGV - 1, 2 do
  if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then
    local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
    redis.call('ZADD', KEYS[3], seq, ARGV[i])
    n = n + 1
    bytes = bytes + #ARGV[i] + #ARGV[i + 1]
  end
end
redis.call('HSET', KEYS[1], 'n', n, 'bytes', bytes)
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], ARGV[4], 1) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'metadata', ARGV[5]) end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return {1, n, bytes}
