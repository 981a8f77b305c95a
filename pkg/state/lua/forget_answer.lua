-- Drops an unstored job's answer (response, usage, error) once its end is trimmed
-- ('cold' is set) and its answer has reached its client ('answered' is set),
-- whichever comes last. The record is written anew, so Redis encodes what is left
-- compactly.
-- KEYS[1] job       the job's hash
-- ARGV[1] answered  "1" from the ingress that answered, "0" from the trim
-- Returns 1 when it dropped the answer, else 0.

if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] == '1' then redis.call('HSET', KEYS[1], 'answered', '1') end
if redis.call('HEXISTS', KEYS[1], 'cold') == 0 or redis.call('HEXISTS', KEYS[1], 'answered') == 0 then return 0 end
local all, rest, dropped = redis.call('HGETALL', KEYS[1]), {}, 0
for i = 1, #all, 2 do
  local f = all[i]
  if f == 'response' or f == 'usage' or f == 'error' then
    dropped = 1
  elseif f ~= 'answered' then
    rest[#rest+1] = f; rest[#rest+1] = all[i+1]
  end
end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(rest))
redis.call('PEXPIRE', KEYS[1], math.max(ttl, 1))
return dropped
