package state

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// A model turn is held as spend.ReserveTurn says, keyed by its call name
// (spend.TurnCall). A reservation never settled (its worker died, the call failed and
// the job ended) lapses after its TTL: the tenant's next reservation of the day gives
// it back. In the tenant's day ledger (spendCalls) a reservation not yet settled is
// held as "micros:searches:p".

// jobReserveTurnCap reserves a turn's price against the ledger in its job's hash and
// notes the tenant's day it is reserved in. (lua/job_reserve_turn_cap.lua)
var jobReserveTurnCap = script("job_reserve_turn_cap")

// settleTurnCap moves a turn's entry in a ledger (a job's or a batch's, by its
// fields' mark) to its cost, recording it when the ledger has none (a reservation
// given back); settling again to the same cost changes nothing.
// (lua/settle_turn_cap.lua)
var settleTurnCap = script("settle_turn_cap")

// releaseTurnCap gives a refused turn's reservation back to a ledger (a job's or a
// batch's). (lua/release_turn_cap.lua)
var releaseTurnCap = script("release_turn_cap")

// reserveTurnSpend reserves a turn's worst case against the tenant's day and month,
// after giving back the day's lapsed turn reservations (at most 64 a call).
// (lua/reserve_turn_spend.lua)
var reserveTurnSpend = script("reserve_turn_spend")

// settleTurnSpend sets a turn's cost in the tenant's day and month: a reservation is
// moved to the cost, a turn with none (it lapsed, or was never made) is recorded;
// settling again to the same cost changes nothing. (lua/settle_turn_spend.lua)
var settleTurnSpend = script("settle_turn_spend")

// turnKeys are the tenant's day ledger keys of day (and its month).
func (s *core) turnKeys(tenant, day string) []string {
	return []string{s.K.spendDay(tenant, day), s.K.spendMonth(tenant, day[:min(6, len(day))]), s.K.spendCalls(tenant, day), s.K.spendPending(tenant, day)}
}

// periodTTLs are how long a day's and a month's counters are kept (a day past each
// period's end, for GET /v1/usage and late settles), in seconds.
func periodTTLs(now time.Time) (day, month int64) {
	dayEnd, monthEnd := spend.PeriodEnds(now)
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
func (s *Ledger) ReserveTurn(ctx context.Context, jobID, tenant, call string, usd float64, searches int, b spend.Budget, ttl time.Duration, now time.Time) (*spend.Exhausted, error) {
	price := spend.Micros(usd)
	day, _ := periods(now)
	keep := s.Retention.Milliseconds()
	v, err := jobReserveTurnCap.Run(ctx, s.r, []string{s.K.Job(jobID), s.K.Job(jobID)}, call, price, keep, day).Slice()
	if err != nil {
		return nil, fmt.Errorf("state: reserving a request's spend: %w", err)
	}
	answer, batch, limit := capAnswer(v[:min(3, len(v))])
	if answer == "over" {
		return &spend.Exhausted{Budget: spend.BudgetRequest, Limit: limit}, nil
	}
	if len(v) == 4 {
		day, _ = v[3].(string)
	}
	giveBack := func(batched bool) {
		ctx := context.WithoutCancel(ctx)
		releaseTurnCap.Run(ctx, s.r, []string{s.K.Job(jobID)}, call, ledgerMark)
		if batched {
			releaseTurnCap.Run(ctx, s.r, []string{s.K.batchSpend(batch)}, call, "")
		}
	}
	if batch != "" {
		if _, ex, err := s.reserveBatch(ctx, batch, call, price); err != nil || ex != nil {
			giveBack(false)
			return ex, err
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
	if got == "ok" || got == "again" {
		return nil, nil
	}
	giveBack(batch != "")
	if ex := b.Refusal(got, now); ex != nil {
		return ex, nil
	}
	return nil, fmt.Errorf("state: reserving spend: unexpected answer %q", got)
}

// SettleTurn sets what call, a model turn of job, really cost (usd, with searches
// native searches) in its job's, batch's and tenant's ledgers, in the day it was
// reserved in (today for a turn never reserved). Settling again to the same cost
// changes nothing. It reports whether the cost was new to the tenant's ledger.
func (s *Ledger) SettleTurn(ctx context.Context, jobID, tenant, call string, usd float64, searches int, now time.Time) (bool, error) {
	cost := spend.Micros(usd)
	today, _ := periods(now)
	keep := s.Retention.Milliseconds()
	v, err := settleTurnCap.Run(ctx, s.r, []string{s.K.Job(jobID), s.K.Job(jobID)}, call, cost, keep, today, ledgerMark).Slice()
	if err != nil {
		return false, fmt.Errorf("state: settling a request's spend: %w", err)
	}
	day := today
	if len(v) == 2 {
		if batch, _ := v[0].(string); batch != "" {
			if err := settleTurnCap.Run(ctx, s.r, []string{s.K.batchSpend(batch)}, call, cost, keep, today, "").Err(); err != nil {
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
		lu = spend.Micros(usd)
	}
	if n > 0 {
		ln = n
	}
	return lu, ln
}

// pendingValue reports whether a spendCalls value is a turn reservation not yet
// settled.
func pendingValue(v any) bool {
	s, _ := v.(string)
	return strings.HasSuffix(s, ":p")
}
