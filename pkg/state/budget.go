package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// Reservation is what one call holds against its tenant's day and month until it
// is settled.
type Reservation struct {
	Tenant string
	Call   string
	Day    string
	Month  string
	// made is set when this reservation wrote the call's entry (not a redelivery
	// finding an earlier one): see Hold.
	made bool
}

// reserveSpend reserves one call's price against a tenant's day and month: every limit
// is checked first, then all counters are raised together, so concurrent workers never
// overshoot a budget. (lua/reserve_spend.lua)
var reserveSpend = script("reserve_spend")

// settleSpend moves a reservation in the tenant's day and month to what the call
// really cost; settling again to the same cost changes nothing. (lua/settle_spend.lua)
var settleSpend = script("settle_spend")

// ReserveSpend reserves usd (one search) for call against tenant's budget in the
// period of now. It returns the reservation to settle, or which budget refused it
// (nothing is reserved then). A call that is already reserved (a redelivered search)
// gets its reservation back without reserving again.
func (s *Ledger) ReserveSpend(ctx context.Context, tenant, call string, usd float64, b spend.Budget, now time.Time) (*Reservation, *spend.Exhausted, error) {
	sp := s.spendArgs(tenant, b, now)
	argv := append([]any{call, spend.Micros(usd)}, sp.argv...)
	v, err := reserveSpend.Run(ctx, s.r, sp.keys, argv...).Text()
	if err != nil {
		return nil, nil, fmt.Errorf("state: reserving spend: %w", err)
	}
	r, ex := sp.answer(tenant, call, b, v)
	if r == nil && ex == nil {
		return nil, nil, fmt.Errorf("state: reserving spend: unexpected answer %q", v)
	}
	return r, ex, nil
}

// spendCall is what reserve_spend.lua takes for a tenant's budget in one period: the
// day's and the month's keys, and the limits and lifetimes (argv).
type spendCall struct {
	keys       []string
	argv       []any
	day, month string
	now        time.Time
}

func (s *core) spendArgs(tenant string, b spend.Budget, now time.Time) spendCall {
	day, month := periods(now)
	du, dn := limitArgs(b.USDPerDay, b.SearchesPerDay)
	mu, mn := limitArgs(b.USDPerMonth, b.SearchesPerMonth)
	dayTTL, monthTTL := periodTTLs(now)
	return spendCall{
		keys: []string{s.K.spendDay(tenant, day), s.K.spendMonth(tenant, month)},
		argv: []any{du, dn, mu, mn, dayTTL, monthTTL},
		day:  day, month: month, now: now,
	}
}

// answer reads reserve_spend.lua's answer v for call: the reservation, or the budget
// that refused it; neither for an answer it does not know.
func (sp spendCall) answer(tenant, call string, b spend.Budget, v string) (*Reservation, *spend.Exhausted) {
	if v == "ok" || v == "again" {
		return &Reservation{Tenant: tenant, Call: call, Day: sp.day, Month: sp.month, made: v == "ok"}, nil
	}
	return nil, b.Refusal(v, sp.now)
}

// SettleSpend sets what r's call really cost: usd over searches searches (0 and 0
// release a call that was not billed). Settling twice to the same cost is harmless.
func (s *Ledger) SettleSpend(ctx context.Context, r *Reservation, usd float64, searches int) error {
	keys := []string{s.K.spendDay(r.Tenant, r.Day), s.K.spendMonth(r.Tenant, r.Month), s.K.spendCalls(r.Tenant, r.Day)}
	if err := settleSpend.Run(ctx, s.r, keys, r.Call, spend.Micros(usd), searches).Err(); err != nil {
		return fmt.Errorf("state: settling spend: %w", err)
	}
	return nil
}

// SpendOf reads a tenant's spend in the day and month of now.
func (s *Ledger) SpendOf(ctx context.Context, tenant string, now time.Time) (spend.Spend, error) {
	day, month := periods(now)
	var dc, mc *redis.SliceCmd
	err := s.pipelined(ctx, func(p redis.Pipeliner) {
		dc = p.HMGet(ctx, s.K.spendDay(tenant, day), "usd", "n")
		mc = p.HMGet(ctx, s.K.spendMonth(tenant, month), "usd", "n")
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return spend.Spend{}, fmt.Errorf("state: reading spend: %w", err)
	}
	num := func(v any) int64 {
		str, _ := v.(string)
		n, _ := strconv.ParseInt(str, 10, 64)
		return n
	}
	sp := spend.Spend{Day: day, Month: month}
	if v := dc.Val(); len(v) == 2 {
		sp.DayUSD, sp.DaySearches = spend.USD(num(v[0])), num(v[1])
	}
	if v := mc.Val(); len(v) == 2 {
		sp.MonthUSD, sp.MonthSearches = spend.USD(num(v[0])), num(v[1])
	}
	return sp, nil
}

// IdempotencyClaimed reports whether a tenant's Idempotency-Key already names a job:
// a retry of an accepted submission is answered with that job even when the tenant's
// budget has since run out.
func (s *Jobs) IdempotencyClaimed(ctx context.Context, tenant, key string) (bool, error) {
	n, err := s.r.Exists(ctx, s.K.idempotency(tenant, key)).Result()
	if err != nil {
		return false, fmt.Errorf("state: reading an Idempotency-Key: %w", err)
	}
	return n == 1, nil
}

// periods names the UTC day and month of t.
func periods(t time.Time) (day, month string) {
	t = t.UTC()
	return t.Format("20060102"), t.Format("200601")
}
