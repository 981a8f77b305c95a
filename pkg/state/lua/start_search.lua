-- Reads what a search worker needs before searching and claims the call's lease.
-- uses fn/claim.lua
-- KEYS[1] job            the job's hash
-- KEYS[2] lease          the call's lease
-- ARGV[1] owner          who claims the lease
-- ARGV[2] ttl            the lease, ms
-- ARGV[3] outcomefield   the call's outcome field
-- ARGV[4] enginefield    the call's fallback engine field
-- ARGV[5] triedfield     the call's tried field
-- ARGV[6] resultfield    the call's result field (a chain's call stores its outcome there)
-- Returns {outcome or false, fallback engine, tried, status, tenant, lease}:
-- lease as lease.lua's.

local j = redis.call('HMGET', KEYS[1], 'status', 'tenant', ARGV[3], ARGV[4], ARGV[5], ARGV[6])
local l = claim(KEYS[2], ARGV[1], ARGV[2])
local st = j[1]
local live = st and st ~= 'completed' and st ~= 'failed' and st ~= 'cancelled'
-- A chain's result is the call's outcome while its job runs; an ended job's search
-- has nothing to resume.
if not j[3] and live then j[3] = j[6] end
return {j[3], j[4], j[5], j[1], j[2], l}
