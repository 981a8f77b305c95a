package statefake

import (
	"context"
	"math"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// The spend ledgers, as pkg/state keeps them (ledger.go, turns.go, budget.go): a
// capped ledger per job and per batch, and a tenant's day and month with the day's
// calls. Amounts are integer micro-dollars, so limits compare exactly.

type ledger struct {
	usd     int64
	cap     int64 // -1: none
	entries map[string]int64
	days    map[string]string // a turn's reservation day
}

type counter struct{ usd, n int64 }

// entry is one call in a tenant's day: its price or cost, its searches, and whether
// it is a turn's reservation not yet settled (lapsing at until).
type entry struct {
	usd, n  int64
	pending bool
	until   time.Time
}

func toMicros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }
func fromMicros(n int64) float64 { return float64(n) / 1e6 }
func periods(t time.Time) (string, string) {
	t = t.UTC()
	return t.Format("20060102"), t.Format("200601")
}

func (m *Memory) ledgerOf(set map[string]*ledger, id string) *ledger {
	l, ok := set[id]
	if !ok {
		l = &ledger{cap: -1, entries: map[string]int64{}, days: map[string]string{}}
		set[id] = l
	}
	return l
}

// reserveCap holds price for call in l: "again" when it holds it already, "over" when
// the cap refuses it.
func (l *ledger) reserve(call string, price int64) string {
	if _, ok := l.entries[call]; ok {
		return "again"
	}
	if l.cap >= 0 && l.usd+price > l.cap {
		return "over"
	}
	l.usd += price
	l.entries[call] = price
	return "ok"
}

// settle moves call's entry to cost (nothing when it holds none).
func (l *ledger) settle(call string, cost int64) {
	if r, ok := l.entries[call]; ok {
		l.usd += cost - r
		l.entries[call] = cost
	}
}

// settleTurn moves call's entry to cost, recording it when the ledger holds none.
func (l *ledger) settleTurn(call string, cost int64, today string) string {
	r := l.entries[call]
	day, dok := l.days[call]
	if !dok {
		day = today
	}
	l.usd += cost - r
	l.entries[call], l.days[call] = cost, day
	return day
}

// release gives a turn's reservation back.
func (l *ledger) release(call string) {
	if r, ok := l.entries[call]; ok {
		l.usd -= r
		delete(l.entries, call)
		delete(l.days, call)
	}
}

func (m *Memory) period(key string) *counter {
	c, ok := m.periods[key]
	if !ok {
		c = &counter{}
		m.periods[key] = c
	}
	return c
}

func (m *Memory) dayCalls(tenant, day string) map[string]*entry {
	k := tenant + "/" + day
	c, ok := m.calls[k]
	if !ok {
		c = map[string]*entry{}
		m.calls[k] = c
	}
	return c
}

// add moves a tenant's day (and its month) by usd and n.
func (m *Memory) add(tenant, day string, usd, n int64) {
	for _, k := range []string{tenant + "/" + day, tenant + "/" + day[:min(6, len(day))]} {
		c := m.period(k)
		c.usd += usd
		c.n += n
	}
}

// sweep gives back a tenant's turn reservations of day that lapsed.
func (m *Memory) sweep(tenant, day string) {
	now := time.Now()
	for call, e := range m.dayCalls(tenant, day) {
		if e.pending && !e.until.After(now) {
			m.add(tenant, day, -e.usd, -e.n)
			delete(m.dayCalls(tenant, day), call)
		}
	}
}

// exhausted names the budget of b that usd (and n searches, counted only when
// counted) would overrun in the tenant's day and month.
func (m *Memory) exhausted(tenant, day string, b state.Budget, price, n int64, countSearches bool, now time.Time) *state.Exhausted {
	d, mo := m.period(tenant+"/"+day), m.period(tenant+"/"+day[:min(6, len(day))])
	dayEnd, monthEnd := state.PeriodEnds(now)
	switch {
	case b.USDPerDay > 0 && d.usd+price > toMicros(b.USDPerDay):
		return &state.Exhausted{Budget: state.BudgetUSDDay, Limit: b.USDPerDay, Reset: dayEnd}
	case countSearches && b.SearchesPerDay > 0 && d.n+n > b.SearchesPerDay:
		return &state.Exhausted{Budget: state.BudgetSearchesDay, Limit: float64(b.SearchesPerDay), Reset: dayEnd}
	case b.USDPerMonth > 0 && mo.usd+price > toMicros(b.USDPerMonth):
		return &state.Exhausted{Budget: state.BudgetUSDMonth, Limit: b.USDPerMonth, Reset: monthEnd}
	case countSearches && b.SearchesPerMonth > 0 && mo.n+n > b.SearchesPerMonth:
		return &state.Exhausted{Budget: state.BudgetSearchesMonth, Limit: float64(b.SearchesPerMonth), Reset: monthEnd}
	}
	return nil
}

// ReserveCall implements search.Store: a search's price against its job's ledger, its
// batch's and its tenant's budget, once per call; a refusal gives back what was held.
func (m *Memory) ReserveCall(_ context.Context, jobID, tenant, call string, usd float64, b state.Budget, now time.Time) (*state.Hold, *state.Exhausted, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	price := toMicros(usd)
	jl := m.ledgerOf(m.jobLedgers, jobID)
	if jl.reserve(call, price) == "over" {
		return nil, &state.Exhausted{Budget: state.BudgetRequest, Limit: fromMicros(jl.cap)}, nil
	}
	return m.reserveRest(jobID, tenant, call, price, b, now)
}

// ReserveHeld implements search.Store: the batch's and tenant's parts of a call
// whose job's part StartSearch held.
func (m *Memory) ReserveHeld(_ context.Context, h *state.Hold, tenant string, b state.Budget, now time.Time) (*state.Hold, *state.Exhausted, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reserveRest(h.JobID, tenant, h.Call, m.paid[h.JobID+"\x00"+h.Call], b, now)
}

// reserveRest is ReserveCall after the job's part.
func (m *Memory) reserveRest(jobID, tenant, call string, price int64, b state.Budget, now time.Time) (*state.Hold, *state.Exhausted, error) {
	batch := m.batchOf(jobID)
	jl := m.ledgerOf(m.jobLedgers, jobID)
	h := &state.Hold{JobID: jobID, Batch: batch, Call: call}
	giveBack := func(batched bool) {
		jl.settle(call, 0)
		if batched {
			m.ledgerOf(m.batchLedgers, batch).settle(call, 0)
		}
	}
	if batch != "" {
		bl := m.ledgerOf(m.batchLedgers, batch)
		if bl.reserve(call, price) == "over" {
			giveBack(false)
			h.Batch = ""
			return nil, &state.Exhausted{Budget: state.BudgetBatch, Limit: fromMicros(bl.cap)}, nil
		}
	}
	day, month := periods(now)
	r := &state.Reservation{Tenant: tenant, Call: call, Day: day, Month: month}
	calls := m.dayCalls(tenant, day)
	if _, ok := calls[call]; ok {
		h.Tenant = r
		return h, nil, nil
	}
	if ex := m.exhausted(tenant, day, b, price, 1, true, now); ex != nil {
		giveBack(batch != "")
		return nil, ex, nil
	}
	m.add(tenant, day, price, 1)
	calls[call] = &entry{usd: price, n: 1}
	h.Tenant = r
	return h, nil, nil
}

// SettleCall implements search.Store.
func (m *Memory) SettleCall(_ context.Context, h *state.Hold, usd float64, searches int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cost := toMicros(usd)
	m.ledgerOf(m.jobLedgers, h.JobID).settle(h.Call, cost)
	if h.Batch != "" {
		m.ledgerOf(m.batchLedgers, h.Batch).settle(h.Call, cost)
	}
	if r := h.Tenant; r != nil {
		if e, ok := m.dayCalls(r.Tenant, r.Day)[r.Call]; ok {
			m.add(r.Tenant, r.Day, cost-e.usd, int64(searches)-e.n)
			e.usd, e.n, e.pending = cost, int64(searches), false
		}
	}
	return nil
}

// ReserveTurn implements chat.Ledger.
func (m *Memory) ReserveTurn(_ context.Context, jobID, tenant, call string, usd float64, searches int, b state.Budget, ttl time.Duration, now time.Time) (*state.Exhausted, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	batch := m.batchOf(jobID)
	price := toMicros(usd)
	day, _ := periods(now)
	jl := m.ledgerOf(m.jobLedgers, jobID)
	if _, ok := jl.entries[call]; ok {
		if d, ok := jl.days[call]; ok {
			day = d
		}
	} else if jl.reserve(call, price) == "over" {
		return &state.Exhausted{Budget: state.BudgetRequest, Limit: fromMicros(jl.cap)}, nil
	} else {
		jl.days[call] = day
	}
	giveBack := func(batched bool) {
		jl.release(call)
		if batched {
			m.ledgerOf(m.batchLedgers, batch).release(call)
		}
	}
	if batch != "" {
		bl := m.ledgerOf(m.batchLedgers, batch)
		if bl.reserve(call, price) == "over" {
			giveBack(false)
			return &state.Exhausted{Budget: state.BudgetBatch, Limit: fromMicros(bl.cap)}, nil
		}
	}
	m.sweep(tenant, day)
	calls := m.dayCalls(tenant, day)
	if _, ok := calls[call]; ok {
		return nil, nil
	}
	n := int64(searches)
	if ex := m.exhausted(tenant, day, b, price, n, n > 0, now); ex != nil {
		giveBack(batch != "")
		return ex, nil
	}
	m.add(tenant, day, price, n)
	calls[call] = &entry{usd: price, n: n, pending: true, until: time.Now().Add(max(ttl, time.Second))}
	return nil, nil
}

// SettleTurn implements chat.Ledger.
func (m *Memory) SettleTurn(_ context.Context, jobID, tenant, call string, usd float64, searches int, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	batch := m.batchOf(jobID)
	cost := toMicros(usd)
	today, _ := periods(now)
	day := m.ledgerOf(m.jobLedgers, jobID).settleTurn(call, cost, today)
	if batch != "" {
		m.ledgerOf(m.batchLedgers, batch).settleTurn(call, cost, today)
	}
	calls := m.dayCalls(tenant, day)
	e, ok := calls[call]
	if ok && !e.pending && e.usd == cost && e.n == int64(searches) {
		return false, nil
	}
	var pu, pn int64
	if ok {
		pu, pn = e.usd, e.n
	}
	m.add(tenant, day, cost-pu, int64(searches)-pn)
	calls[call] = &entry{usd: cost, n: int64(searches)}
	return !ok || e.pending, nil
}

// UnrecordedCalls implements chat.Ledger.
func (m *Memory) UnrecordedCalls(_ context.Context, tenant string, calls []string, now time.Time) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	day, _ := periods(now)
	got := m.dayCalls(tenant, day)
	var out []string
	for _, c := range calls {
		if e, ok := got[c]; !ok || e.pending {
			out = append(out, c)
		}
	}
	return out, nil
}

// SetRequestCap implements chat.Ledger.
func (m *Memory) SetRequestCap(_ context.Context, jobID string, usd float64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ledgerOf(m.jobLedgers, jobID).cap = toMicros(usd)
	return nil
}

// RequestSpend implements chat.Ledger.
func (m *Memory) RequestSpend(_ context.Context, jobID string) (usd, capUSD float64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spendOf(m.jobLedgers, jobID)
}

func (m *Memory) spendOf(set map[string]*ledger, id string) (usd, capUSD float64, err error) {
	l, ok := set[id]
	if !ok {
		return 0, 0, nil
	}
	return fromMicros(l.usd), fromMicros(max(l.cap, 0)), nil
}

// SetBatchCap caps a batch's spend (the ttl is the Redis ledger's; here it is kept).
func (m *Memory) SetBatchCap(_ context.Context, batchID string, usd float64, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ledgerOf(m.batchLedgers, batchID).cap = toMicros(usd)
	return nil
}

// BatchSpendOf reads what a batch's jobs spent and its cap (0: none).
func (m *Memory) BatchSpendOf(_ context.Context, batchID string) (usd, capUSD float64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spendOf(m.batchLedgers, batchID)
}

// SpendOf reads a tenant's spend in the day and month of now.
func (m *Memory) SpendOf(_ context.Context, tenant string, now time.Time) (state.Spend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	day, month := periods(now)
	sp := state.Spend{Day: day, Month: month}
	if c, ok := m.periods[tenant+"/"+day]; ok {
		sp.DayUSD, sp.DaySearches = fromMicros(c.usd), c.n
	}
	if c, ok := m.periods[tenant+"/"+month]; ok {
		sp.MonthUSD, sp.MonthSearches = fromMicros(c.usd), c.n
	}
	return sp, nil
}
