-- Gives a batch its final status unless it has one. The batch's keys then expire
-- after ttl; its recorded searches, which only its running jobs read, are deleted.
-- KEYS[1] batch     the batch record
-- KEYS[2] done      the lines' outcomes
-- KEYS[3] ids       the lines' custom ids
-- KEYS[4] searches  the batch's recorded searches
-- ARGV[1] status    the final status
-- ARGV[2] stamp     the timestamp field to set
-- ARGV[3] now       ms
-- ARGV[4] ttl       ms
-- ARGV[5..] field/value pairs
-- Returns 1 if it moved the batch, else 0.

local st = redis.call('HGET', KEYS[1], 'status')
if not st or st == 'completed' or st == 'failed' or st == 'expired' or st == 'cancelled' then return 0 end
local f = {'status', ARGV[1], ARGV[2], ARGV[3], 'progress_at', ARGV[3]}
for i = 5, #ARGV do f[#f+1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(f))
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
redis.call('DEL', KEYS[4])
return 1
