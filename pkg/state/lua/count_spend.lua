
if redis.call('HEXISTS', KEYS[1], 'id') == 0 then return {-1} end
if redis.call('HSETNX', KEYS[1], 'spend_counted', '1') == 0 then return {0} end
return {1, tonumber(redis.call('HGET', KEYS[1], '$usd') or '0')}
