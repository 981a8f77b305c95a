package search

import (
	"context"
	"errors"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// BudgetExhausted is the error type of the result a search gets when its tenant's
// budget is used up: the model reads it and answers with what it has.
const BudgetExhausted = "SEARCH_BUDGET_EXHAUSTED"

// reserve holds the engine's price for one search, before the engine is paid,
// against its job's ledger (the request's max_cost_usd), its batch's (the batch's cap)
// and its tenant's budget (Store.ReserveCall; the job's part is held by StartSearch
// already when it was asked to pay, see pay). It returns the hold to settle
// after the call, or, when a budget is used up, the result the model reads instead of
// a search. A redelivered search finds its earlier reservation and reserves nothing
// more. The reservation is per call and engine: a call handed to a fallback engine
// reserves that engine's price anew (the failed engine's reservation was settled to
// nothing).
func (w *Worker) reserve(ctx context.Context, req Request, ss *state.SearchStart, eng engines.Engine) (*state.Hold, *engines.Result, error) {
	tenant := ss.Tenant
	var h *state.Hold
	var ex *spend.Exhausted
	var err error
	switch {
	case ss.Refused != nil:
		ex = ss.Refused
	case ss.Held != nil:
		h, ex, err = w.Store.ReserveHeld(ctx, ss.Held, tenant, w.Budgets.For(tenant), time.Now())
	default:
		h, ex, err = w.Store.ReserveCall(ctx, req.JobID, tenant, payCall(req), engines.PriceOf(eng), w.Budgets.For(tenant), time.Now())
	}
	if err != nil || ex == nil {
		return h, nil, err
	}
	w.count(req.Engine, "budget_exhausted")
	if w.Metrics != nil {
		w.Metrics.BudgetExhausted.WithLabelValues(tenant, ex.Budget).Inc()
	}
	res := engines.InvalidArgumentsResult(BudgetExhausted,
		"the search budget is used up. Answer now from the results you already have and what you know, say that no further search could be made, and do not call web_search again.",
		ex.SearchRefused())
	res.Engine, res.Query = req.Engine, req.Query.Query
	return nil, res, nil
}

// payCall is the name a search is paid under in the spend ledgers: the call and
// the engine that runs it.
func payCall(req Request) string {
	return bus.CallKey(req.JobID, req.Hop, req.CallID) + "@" + req.Engine
}

// pay asks StartSearch to hold the search's price against its job's ledger, and
// its tenant's budget when the request names the tenant, as it claims the call: a
// round trip fewer than reserving them apart; not for an engine whose results are
// cached, as a hit (looked up after the claim) costs nothing.
func (w *Worker) pay(req Request, eng engines.Engine) *state.Pay {
	if w.Settings[req.Engine].CacheTTL > 0 {
		return nil
	}
	p := &state.Pay{Call: payCall(req), Engine: req.Engine, USD: engines.PriceOf(eng)}
	if req.Tenant != "" {
		p.Tenant, p.Budget, p.Now = req.Tenant, w.Budgets.For(req.Tenant), time.Now()
	}
	return p
}

// unreserve gives back the price StartSearch held for a search that is not made
// after all (the engine's rate limit kept it waiting too long). A search past its
// job's deadline is never held (Handle asks StartSearch for no payment).
func (w *Worker) unreserve(ctx context.Context, ss *state.SearchStart, engine string) {
	if ss.Held != nil {
		w.settle(ctx, ss.Held, engine, nil, errNotSearched)
	}
}

// errNotSearched settles a hold to nothing: no search was made.
var errNotSearched = errors.New("no search was made")

// settle moves a search's reservation to what the engine really charged: the
// result's cost, or nothing for a call that failed (engines do not bill those).
func (w *Worker) settle(ctx context.Context, h *state.Hold, engine string, res *engines.Result, failed error) {
	if h == nil {
		return
	}
	var u engines.Usage
	if failed == nil && res != nil {
		u = res.Usage
	}
	if err := w.Store.SettleCall(context.WithoutCancel(ctx), h, u.CostUSD, u.Searches); err != nil {
		// The reservation stays at the price: spend is over-counted, never under.
		w.Log.Warn("search: settling spend", "engine", engine, "job", h.JobID, "err", err)
	}
	if w.Metrics != nil && u.CostUSD > 0 && h.Tenant != nil {
		w.Metrics.Spend(h.Tenant.Tenant, metrics.SpendSearch, engine, u.CostUSD)
	}
}
