-- Sums the bytes (field names and values) of a job's hashes, and the archived bytes
-- the job record notes (field "cold"). The calls' outcomes and fallback state are not
-- counted: an outcome repeats a result the chain keeps, and neither outlives the job.
-- KEYS[1] job       the job's hash
-- KEYS[2] response  its stored response
-- Returns the bytes.

-- An archived job (its record notes the archived bytes in 'cold') keeps only its
-- short record, with its summary, in Redis: 2 commands instead of a walk of every key.
local cold = redis.call('HGET', KEYS[1], 'cold')
if cold then
  local n = tonumber(cold)
  for _, x in ipairs(redis.call('HGETALL', KEYS[1])) do n = n + #x end
  return n
end
local n = 0
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t == 'hash' then
    for _, f in ipairs(redis.call('HKEYS', k)) do
      if k ~= KEYS[1] or not (string.find(f, '^o:') or string.find(f, '^fe:') or string.find(f, '^ft:') or string.find(f, '^i:')) then
        n = n + #f + redis.call('HSTRLEN', k, f)
      end
    end
  elseif t == 'string' then
    n = n + redis.call('STRLEN', k)
  end
end
return n
