package state

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A model turn is reserved before the model is called, as a search is: its worst case
// (the request's bytes as tokens, the answer's max_tokens, the native searches it may
// run, at the model's prices) is held against the job's ledger (max_cost_usd), the
// batch's (its cap) and the tenant's day and month, each atomically across workers;
// the call is refused when it does not fit. When the answer is in, the turn is settled
// to what it cost. A reservation is keyed by the turn's call name (job:hop@model), so
// a redelivered step reserves nothing more. A reservation never settled (its worker
// died, the call failed and the job ended) lapses after its TTL: the tenant's next
// reservation of the day gives it back. In the tenant's day ledger (SpendCalls) a
// reservation not yet settled is held as "micros:searches:p".

// reserveTurnCap reserves a turn's price against its job's ledger and notes the
// tenant's day it is reserved in. KEYS[1] job ledger, KEYS[2] job record. ARGV[1]
// call, ARGV[2] price (micro-dollars), ARGV[3] TTL ms, ARGV[4] day. Returns
// {'ok'|'again'|'over', batch, cap, day}.
const reserveTurnCapLua = ledgerTTL + `
local batch = redis.call('HGET', KEYS[2], 'batch') or ''
local f = 'r:' .. ARGV[1]
if redis.call('HEXISTS', KEYS[1], f) == 1 then
  return {'again', batch, 0, redis.call('HGET', KEYS[1], 'd:' .. ARGV[1]) or ARGV[4]}
end
local price = tonumber(ARGV[2])
local cap = tonumber(redis.call('HGET', KEYS[1], 'cap') or '-1')
local usd = tonumber(redis.call('HGET', KEYS[1], 'usd') or '0')
if cap >= 0 and usd + price > cap then return {'over', batch, cap, ARGV[4]} end
redis.call('HINCRBY', KEYS[1], 'usd', price)
redis.call('HSET', KEYS[1], f, price, 'd:' .. ARGV[1], ARGV[4])
keep(KEYS[1], ARGV[3])
return {'ok', batch, 0, ARGV[4]}
`

var jobReserveTurnCap = jobLedger(reserveTurnCapLua)

// settleTurnCap moves a call's entry in a ledger to its cost, recording it when the
// ledger has none (a reservation given back, or a ledger written before reservations);
// settling again to the same cost changes nothing. KEYS[1] ledger; KEYS[2], optional,
// the job record. ARGV[1] call, ARGV[2] cost, ARGV[3] TTL ms, ARGV[4] today.
// Returns {batch, day}: the job's batch and the day the call was reserved in.
const settleTurnCapLua = ledgerTTL + `
local batch = ''
if KEYS[2] then batch = redis.call('HGET', KEYS[2], 'batch') or '' end
local f = 'r:' .. ARGV[1]
local r = redis.call('HGET', KEYS[1], f)
local day = redis.call('HGET', KEYS[1], 'd:' .. ARGV[1]) or ARGV[4]
local d = tonumber(ARGV[2]) - tonumber(r or '0')
if d ~= 0 then redis.call('HINCRBY', KEYS[1], 'usd', d) end
if not r or d ~= 0 then
  redis.call('HSET', KEYS[1], f, ARGV[2], 'd:' .. ARGV[1], day)
  keep(KEYS[1], ARGV[3])
end
return {batch, day}
`

var (
	settleTurnCap    = redis.NewScript(settleTurnCapLua)
	jobSettleTurnCap = jobLedger(settleTurnCapLua)
)

// releaseTurnCap gives a refused turn's reservation back to a ledger. KEYS[1] ledger,
// ARGV[1] call.
const releaseTurnCapLua = `
local r = redis.call('HGET', KEYS[1], 'r:' .. ARGV[1])
if not r then return 0 end
redis.call('HINCRBY', KEYS[1], 'usd', -tonumber(r))
redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1], 'd:' .. ARGV[1])
return 1
`

var (
	releaseTurnCap    = redis.NewScript(releaseTurnCapLua)
	jobReleaseTurnCap = jobLedger(releaseTurnCapLua)
)

// sweepPending gives back a tenant's lapsed turn reservations of a day (at most 64 a
// call). KEYS as reserveTurnSpend.
const sweepPending = `
local function parse(v)
  local p, n, pend = string.match(v, '^(-?%d+):(%d+)(:?p?)$')
  return tonumber(p), tonumber(n), pend == ':p'
end
local function sweep()
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 64)) do
    local v = redis.call('HGET', KEYS[3], m)
    if v then
      local p, n, pend = parse(v)
      if pend then
        redis.call('HINCRBY', KEYS[1], 'usd', -p)
        redis.call('HINCRBY', KEYS[2], 'usd', -p)
        if n > 0 then
          redis.call('HINCRBY', KEYS[1], 'n', -n)
          redis.call('HINCRBY', KEYS[2], 'n', -n)
        end
        redis.call('HDEL', KEYS[3], m)
      end
    end
    redis.call('ZREM', KEYS[4], m)
  end
  return now
end
`

// reserveTurnSpend reserves a turn's worst case against the tenant's day and month.
// KEYS[1] day, KEYS[2] month, KEYS[3] the day's calls, KEYS[4] the day's pending
// reservations. ARGV[1] call, ARGV[2] price (micro-dollars), ARGV[3] searches (the
// native searches the turn may run), ARGV[4..7] limits as reserveSpend, ARGV[8] day
// TTL s, ARGV[9] month TTL s, ARGV[10] reservation TTL ms. Returns 'ok', 'again' or
// the budget that refused.
var reserveTurnSpend = redis.NewScript(sweepPending + `
local now = sweep()
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 'again' end
local price, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local du = tonumber(redis.call('HGET', KEYS[1], 'usd') or '0')
local dn = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local mu = tonumber(redis.call('HGET', KEYS[2], 'usd') or '0')
local mn = tonumber(redis.call('HGET', KEYS[2], 'n') or '0')
local lim = {tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])}
if lim[1] >= 0 and du + price > lim[1] then return 'usd_day' end
if n > 0 and lim[2] >= 0 and dn + n > lim[2] then return 'searches_day' end
if lim[3] >= 0 and mu + price > lim[3] then return 'usd_month' end
if n > 0 and lim[4] >= 0 and mn + n > lim[4] then return 'searches_month' end
redis.call('HINCRBY', KEYS[1], 'usd', price)
redis.call('HINCRBY', KEYS[2], 'usd', price)
if n > 0 then
  redis.call('HINCRBY', KEYS[1], 'n', n)
  redis.call('HINCRBY', KEYS[2], 'n', n)
end
redis.call('HSET', KEYS[3], ARGV[1], price .. ':' .. n .. ':p')
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[10]), ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[8])  -- the day's calls live in it (KEYS[3])
redis.call('EXPIRE', KEYS[4], ARGV[8])
redis.call('EXPIRE', KEYS[2], ARGV[9])
return 'ok'
`)

// settleTurnSpend sets a turn's cost in the tenant's day and month: a reservation is
// moved to the cost, a turn with none (its reservation lapsed, or never made) is
// recorded; settling again to the same cost changes nothing. KEYS as
// reserveTurnSpend; ARGV[1] call, ARGV[2] cost, ARGV[3] searches, ARGV[4] day TTL s,
// ARGV[5] month TTL s. Returns 1 when the cost is new to the ledger.
var settleTurnSpend = redis.NewScript(sweepPending + moveCost + `
local v = redis.call('HGET', KEYS[3], ARGV[1])
local cu, cn = tonumber(ARGV[2]), tonumber(ARGV[3])
local pu, pn, pend = 0, 0, false
if v then pu, pn, pend = parse(v) end
if v and not pend then
  if pu == cu and pn == cn then return 0 end
end
move(pu, pn, cu, cn)
redis.call('HSET', KEYS[3], ARGV[1], cu .. ':' .. cn)
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])  -- the day's calls live in it (KEYS[3])
redis.call('EXPIRE', KEYS[2], ARGV[5])
if v and not pend then return 0 end
return 1
`)

// turnKeys are the tenant's day ledger keys of day (and its month).
func (s *core) turnKeys(tenant, day string) []string {
	return []string{s.K.SpendDay(tenant, day), s.K.SpendMonth(tenant, day[:min(6, len(day))]), s.K.SpendCalls(tenant, day), s.K.SpendPending(tenant, day)}
}

// periodTTLs are how long a day's and a month's counters are kept (a day past each
// period's end, for GET /v1/usage and late settles), in seconds.
func periodTTLs(now time.Time) (day, month int64) {
	dayEnd, monthEnd := PeriodEnds(now)
	day = int64(time.Until(dayEnd.Add(24*time.Hour)).Seconds()) + 1
	month = int64(time.Until(monthEnd.Add(24*time.Hour)).Seconds()) + 1
	return max(day, 60), max(month, 60)
}

// ReserveTurn reserves the worst case of a model turn (usd, and searches native
// searches) for call against job's ledger (the request's max_cost_usd), its batch's
// and tenant's budget b, in the period of now, before the model is called. It returns
// the budget that refused the turn (nothing is held then). A turn reserved already (a
// redelivered step) reserves nothing more. ttl is how long the reservation holds if it
// is never settled: past it, it is given back.
func (s *Ledger) ReserveTurn(ctx context.Context, jobID, tenant, call string, usd float64, searches int, b Budget, ttl time.Duration, now time.Time) (*Exhausted, error) {
	price := toMicros(usd)
	day, _ := periods(now)
	keep := s.Retention.Milliseconds()
	v, err := jobReserveTurnCap.Run(ctx, s.r, []string{s.K.Job(jobID), s.K.Job(jobID)}, call, price, keep, day).Slice()
	if err != nil {
		return nil, fmt.Errorf("state: reserving a request's spend: %w", err)
	}
	answer, batch, limit := capAnswer(v[:min(3, len(v))])
	if answer == "over" {
		return &Exhausted{Budget: BudgetRequest, Limit: limit}, nil
	}
	if len(v) == 4 {
		day, _ = v[3].(string)
	}
	giveBack := func(batched bool) {
		ctx := context.WithoutCancel(ctx)
		jobReleaseTurnCap.Run(ctx, s.r, []string{s.K.Job(jobID)}, call)
		if batched {
			releaseTurnCap.Run(ctx, s.r, []string{s.K.BatchSpend(batch)}, call)
		}
	}
	if batch != "" {
		v, err := reserveCap.Run(ctx, s.r, []string{s.K.BatchSpend(batch)}, call, price, keep).Slice()
		if err != nil {
			giveBack(false)
			return nil, fmt.Errorf("state: reserving a batch's spend: %w", err)
		}
		if a, _, limit := capAnswer(v); a == "over" {
			giveBack(false)
			return &Exhausted{Budget: BudgetBatch, Limit: limit}, nil
		}
	}
	du, dn := limitArgs(b.USDPerDay, b.SearchesPerDay)
	mu, mn := limitArgs(b.USDPerMonth, b.SearchesPerMonth)
	dayTTL, monthTTL := periodTTLs(now)
	got, err := reserveTurnSpend.Run(ctx, s.r, s.turnKeys(tenant, day), call, price, searches, du, dn, mu, mn, dayTTL, monthTTL, max(ttl.Milliseconds(), 1000)).Text()
	if err != nil {
		giveBack(batch != "")
		return nil, fmt.Errorf("state: reserving spend: %w", err)
	}
	dayEnd, monthEnd := PeriodEnds(now)
	var ex *Exhausted
	switch got {
	case "ok", "again":
		return nil, nil
	case BudgetUSDDay:
		ex = &Exhausted{Budget: got, Limit: b.USDPerDay, Reset: dayEnd}
	case BudgetSearchesDay:
		ex = &Exhausted{Budget: got, Limit: float64(b.SearchesPerDay), Reset: dayEnd}
	case BudgetUSDMonth:
		ex = &Exhausted{Budget: got, Limit: b.USDPerMonth, Reset: monthEnd}
	case BudgetSearchesMonth:
		ex = &Exhausted{Budget: got, Limit: float64(b.SearchesPerMonth), Reset: monthEnd}
	default:
		giveBack(batch != "")
		return nil, fmt.Errorf("state: reserving spend: unexpected answer %q", got)
	}
	giveBack(batch != "")
	return ex, nil
}

// SettleTurn sets what call, a model turn of job, really cost (usd, with searches
// native searches) in its job's, batch's and tenant's ledgers, in the day it was
// reserved in (today for a turn never reserved). Settling again to the same cost
// changes nothing. It reports whether the cost was new to the tenant's ledger.
func (s *Ledger) SettleTurn(ctx context.Context, jobID, tenant, call string, usd float64, searches int, now time.Time) (bool, error) {
	cost := toMicros(usd)
	today, _ := periods(now)
	keep := s.Retention.Milliseconds()
	v, err := jobSettleTurnCap.Run(ctx, s.r, []string{s.K.Job(jobID), s.K.Job(jobID)}, call, cost, keep, today).Slice()
	if err != nil {
		return false, fmt.Errorf("state: settling a request's spend: %w", err)
	}
	day := today
	if len(v) == 2 {
		if batch, _ := v[0].(string); batch != "" {
			if err := settleTurnCap.Run(ctx, s.r, []string{s.K.BatchSpend(batch)}, call, cost, keep, today).Err(); err != nil {
				return false, fmt.Errorf("state: settling a batch's spend: %w", err)
			}
		}
		if d, _ := v[1].(string); len(d) == 8 {
			day = d
		}
	}
	dayTTL, monthTTL := periodTTLs(now)
	n, err := settleTurnSpend.Run(ctx, s.r, s.turnKeys(tenant, day), call, cost, searches, dayTTL, monthTTL).Int()
	if err != nil {
		return false, fmt.Errorf("state: settling spend: %w", err)
	}
	return n == 1, nil
}

// limitArgs are a budget's limits as the scripts read them (-1: none).
func limitArgs(usd float64, n int64) (int64, int64) {
	lu, ln := int64(-1), int64(-1)
	if usd > 0 {
		lu = toMicros(usd)
	}
	if n > 0 {
		ln = n
	}
	return lu, ln
}

// pendingValue reports whether a SpendCalls value is a turn reservation not yet
// settled.
func pendingValue(v any) bool {
	s, _ := v.(string)
	return strings.HasSuffix(s, ":p")
}
