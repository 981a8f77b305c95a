package search

import (
	"context"
	"errors"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// BudgetExhausted is the error type of the result a search gets when its tenant's
// budget is used up: the model reads it and answers with what it has.
const BudgetExhausted = "SEARCH_BUDGET_EXHAUSTED"

// reserve holds the engine's price for one search, before the engine is paid,
// against its job's ledger (the request's max_cost_usd), its batch's (the batch's cap)
// and its tenant's budget (Store.ReserveCall). It returns the hold to settle after the
// call, or, when a budget is used up, the result the model reads instead of a search.
// A redelivered search finds its earlier reservation and reserves nothing more. The
// reservation is per call and engine: a call handed to a fallback engine reserves
// that engine's price anew (the failed engine's reservation was settled to nothing).
func (w *Worker) reserve(ctx context.Context, req Request, ss *state.SearchStart, eng engines.Engine) (*state.Hold, *engines.Result, error) {
	tenant := ss.Tenant
	h, ex, err := w.Store.ReserveCall(ctx, req.JobID, tenant, payCall(req), engines.PriceOf(eng), w.Budgets.For(tenant), time.Now())
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
