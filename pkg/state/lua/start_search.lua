-- Reads what a search worker needs before searching and claims the call's lease.
-- The price is reserved against the job's ledger (one HSET beside the read) only when
-- the lease is claimed and the call is to be searched by this engine: no stored
-- outcome, a job that runs, no fallback away from the engine. A tenant's budget that
-- refuses leaves the job's ledger as it found it.
-- uses fn/claim.lua
-- uses fn/reserve_spend.lua
-- KEYS[1] job            the job's hash
-- KEYS[2] lease          the call's lease
-- KEYS[3] day            optional, the tenant's day
-- KEYS[4] month          optional, the tenant's month
-- ARGV[1] owner          who claims the lease
-- ARGV[2] ttl            the lease, ms
-- ARGV[3] outcomefield   the call's outcome field
-- ARGV[4] enginefield    the call's fallback engine field
-- ARGV[5] triedfield     the call's tried field
-- ARGV[6] ledgerfield    the call's field in the job's ledger ('' not paying)
-- ARGV[7] price          micro-dollars
-- ARGV[8] engine         the engine searching
-- ARGV[9] resultfield    the call's result field (a chain's call stores its outcome there)
-- ARGV[10] tenant        the tenant ('' not paying the tenant's part here)
-- ARGV[11] tenantcall    the call as the tenant's ledger names it
-- ARGV[12..17] the tenant's limits and lifetimes, as reserve_spend.lua's ARGV[3..8]
-- Returns {outcome or false, fallback engine, tried, status, tenant, batch, lease,
-- pay, cap, tenant's}: lease as lease.lua's; pay '' (not reserved), 'ok', 'again'
-- or 'over'; cap the job's cap in micro-dollars; the tenant's part '' (not tried)
-- or reserve_spend.lua's answer.

local j = redis.call('HMGET', KEYS[1], 'status', 'tenant', 'batch', ARGV[3], ARGV[4], ARGV[5], ARGV[6], '$cap', '$usd', ARGV[9])
local l = claim(KEYS[2], ARGV[1], ARGV[2])
local st, pay, cap, spent = j[1], '', 0, ''
local live = st and st ~= 'completed' and st ~= 'failed' and st ~= 'cancelled'
-- A chain's result is the call's outcome while its job runs; an ended job's search
-- has nothing to resume.
if not j[4] and live then j[4] = j[10] end
if ARGV[6] ~= '' and l == 0 and not j[4] and live and (not j[5] or j[5] == ARGV[8]) then
  local price = tonumber(ARGV[7])
  -- The tenant's part, on one Redis, for a job of this tenant outside a batch.
  local function tenant()
    if #KEYS < 4 or (j[3] and j[3] ~= '') or j[2] ~= ARGV[10] then return '' end
    return reserveSpend(KEYS[3], KEYS[4], ARGV[11], price,
      {tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])}, ARGV[16], ARGV[17])
  end
  if j[7] then
    pay = 'again'
    spent = tenant()
  else
    local c, usd = tonumber(j[8] or '-1'), tonumber(j[9] or '0')
    if c >= 0 and usd + price > c then
      pay, cap = 'over', c
    else
      spent = tenant()
      if spent == '' or spent == 'ok' or spent == 'again' then
        redis.call('HSET', KEYS[1], '$usd', string.format('%d', usd + price), ARGV[6], price)
        pay = 'ok'
      end
    end
  end
end
return {j[4], j[5], j[6], j[1], j[2], j[3], l, pay, cap, spent}
