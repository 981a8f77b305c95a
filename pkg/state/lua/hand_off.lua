-- Moves a call to another engine if it is still with from (or has never moved);
-- nothing is kept for a job that is gone (no hash is made without its TTL).
-- KEYS[1] job          the job's hash, which keeps the call's fallback state
-- ARGV[1] from         the engine that failed the call
-- ARGV[2] to           the engine that runs it now
-- ARGV[3] tried        the engines tried, JSON
-- ARGV[4] enginefield  the call's engine field
-- ARGV[5] triedfield   the call's tried field
-- Returns {engine, tried} as they stand after the call.

local v = redis.call('HMGET', KEYS[1], 'id', ARGV[4], ARGV[5])
if not v[1] then return {ARGV[2], ARGV[3]} end
if v[2] and v[2] ~= ARGV[1] then return {v[2], v[3] or ''} end
redis.call('HSET', KEYS[1], ARGV[4], ARGV[2], ARGV[5], ARGV[3])
return {ARGV[2], ARGV[3]}
