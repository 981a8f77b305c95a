-- Drops an archived job's cold parts from Redis once, and counts its spend per
-- model. The record is written anew, so Redis encodes what is left compactly.
-- uses fn/count_model_spend.lua
-- KEYS[1] job       the job's hash
-- KEYS[2] response  its stored response
-- KEYS[3] day       with a single Redis, its tenant's spend per model of the day it
--                   ended
-- ARGV[1] cold      the archived bytes
-- ARGV[2] ttl       the ms the record has left
-- ARGV[3] n         how many arguments the summary's fields take
-- ARGV[4] m         how many the spend per model takes (0, or 6 with KEYS[3])
-- ARGV[5..4+n]      the summary's field/value pairs
-- ARGV[5+n..4+n+m]  the spend per model's, as count_model_spend.lua's ARGV[2..7]
-- ARGV[5+n+m..]     the fields to drop (the cold ones and the chain's)
-- Returns {1, the micro-dollars the job's ledger held, 1 if it counted the spend per
-- model} when it trimmed, {0} when trimmed already, {-1} when the job has not ended
-- (or is gone).

-- One read of the whole record decides and gives what stays; one DEL drops the
-- record and its stored response together before the short fields are written back.
local all = redis.call('HGETALL', KEYS[1])
local sum, sp = tonumber(ARGV[3]), tonumber(ARGV[4])
local drop, st, spent = {}, nil, '0'
local rest = {'cold', ARGV[1]}
for i = 5, 4 + sum do rest[#rest+1] = ARGV[i] end
for i = 5 + sum + sp, #ARGV do drop[ARGV[i]] = true end
for i = 1, #all, 2 do
  local f = all[i]
  if f == 'status' then st = all[i+1] end
  if f == '$usd' then spent = all[i+1] end
  if f == 'cold' then return {0} end
  -- No record field holds a ':' or starts with '$': a chain, call or ledger field
  -- written after the caller read the hash goes too.
  if not drop[f] and not string.find(f, ':', 1, true) and string.sub(f, 1, 1) ~= '$' then
    rest[#rest+1] = f; rest[#rest+1] = all[i+1]
  end
end
if st ~= 'completed' and st ~= 'failed' and st ~= 'cancelled' then return {-1} end
-- Never without a TTL: a record past its time (clocks differ) goes at once.
local ttl = math.max(tonumber(ARGV[2]), 1)
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], unpack(rest))
redis.call('PEXPIRE', KEYS[1], ttl)
if sp == 0 then return {1, tonumber(spent), 0} end
local o = 5 + sum
countModelSpend(KEYS[3], spent, {ARGV[o], ARGV[o+1], ARGV[o+2], ARGV[o+3], ARGV[o+4], ARGV[o+5]})
return {1, tonumber(spent), 1}
