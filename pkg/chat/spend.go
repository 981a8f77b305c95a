package chat

import (
	"context"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A model turn's worst case is held in the spend ledgers (Worker.Ledger) before the
// model is called and settled to what it cost when the answer is in, by pkg/spend's
// turn rules; the search workers hold searches in the same ledgers.

// openRequestLedger runs before hop h's model call (spend.OpenRequest) with the
// request's max_cost_usd (0: none): it reports whether the request's money is spent,
// and that hop is then offered no web_search.
func (w *Worker) openRequestLedger(ctx context.Context, v *view, h int) (spent bool, err error) {
	limit := 0.0
	if o := v.req.Search; o != nil {
		limit = o.MaxCostUSD
	}
	return spend.OpenRequest(ctx, w.Ledger, v.job.ID, limit, h == 0)
}

// worstCase is what hop h's model call can cost at most (spend.Pricing.WorstCase):
// its request body of size bytes, the request's max_tokens, and, when the model may
// run its provider's own search, that search's price times the most searches the job
// may make.
func (w *Worker) worstCase(v *view, size int, native bool) (usd float64, searches int) {
	m := w.Models[v.job.Model]
	price := 0.0
	if native {
		searches = max(w.searchLimit(v), 1)
		if api, ok := upstream.ModelAPIFor(m.Protocol); ok {
			if _, p, ok := api.NativeSearch(m.Upstream); ok {
				price = p // 0: unknown, spend.FallbackSearchUSD
			}
		}
	}
	return m.Pricing.WorstCase(size, v.req.MaxTokens, searches, price), searches
}

// reserveTurn reserves hop h's model call's worst case (worstCase) before it is made
// (spend.ReserveTurn). It reports whether the call may go. A call that does not fit
// ends the job, failed with a budget error (429, insufficient_quota): no model call
// is made that a budget cannot pay.
func (w *Worker) reserveTurn(ctx context.Context, v *view, h int, size int, native bool) (bool, error) {
	usd, searches := w.worstCase(v, size, native)
	t := spend.Turn{Job: v.job.ID, Tenant: v.job.Tenant, Call: spend.TurnCall(v.job.ID, h), USD: usd, Searches: searches}
	ex, err := spend.ReserveTurn(ctx, w.Ledger, w.Budgets.For(v.job.Tenant), t, spend.HoldFor(w.ModelTimeout, w.LeaseTTL), time.Now())
	if err != nil || ex == nil {
		return err == nil, err
	}
	if w.Metrics != nil {
		w.Metrics.BudgetExhausted.WithLabelValues(v.job.Tenant, ex.Budget).Inc()
	}
	return false, w.fail(ctx, v.job.ID, &state.JobError{Status: spend.RefusedStatus, Type: spend.RefusedType, Code: spend.CodeBudget, Message: ex.TurnRefused(usd)})
}

// turnCost prices hop h's stored turn at its model's token prices.
func (w *Worker) turnCost(v *view, h int) float64 {
	t, ok := v.turn(h)
	if !ok {
		return 0
	}
	return w.Models[v.job.Model].Pricing.Cost(t.Usage.PromptTokens, t.Usage.CompletionTokens)
}

// turnSpend is hop h's stored turn in the ledgers: its tokens and its native
// searches (their number and price).
func (w *Worker) turnSpend(v *view, h int) spend.Turn {
	t := spend.Turn{Job: v.job.ID, Tenant: v.job.Tenant, Call: spend.TurnCall(v.job.ID, h), USD: w.turnCost(v, h)}
	if st, _ := v.turn(h); st != nil && st.Native != nil {
		n := st.Native
		t.USD, t.Searches = spend.Round(t.USD+n.CostUSD), n.Requests
	}
	return t
}

// recordTurn settles hop h's stored turn in the spend ledgers to what it cost (its
// reservation, if it has one, becomes that cost). It is called by the worker whose
// answer was stored, and, when the job completes, for a turn the ledger does not hold
// settled (a worker that died between storing a turn and settling it left it to that
// sweep); the ledgers count each turn once. A failure is logged: the completion sweep
// settles it again.
func (w *Worker) recordTurn(ctx context.Context, v *view, h int) float64 {
	t := w.turnSpend(v, h)
	fresh, err := spend.SettleTurn(ctx, w.Ledger, t, time.Now())
	if err != nil {
		w.Log.Warn("chat: settling a model turn's spend", "job", v.job.ID, "hop", h, "err", err)
	}
	if fresh {
		w.Metrics.Spend(v.job.Tenant, metrics.SpendModel, v.job.Model, t.USD)
	}
	return t.USD
}

// jobSpend records the turns of a completing job that are not in the ledgers yet
// (spend.Unsettled) and sums what the job spent, as its usage record and every
// protocol's usage report it (usage.searchfleet): the searches as its trace counted
// them (su), its calls answered from a record and its fetches (tally), and the turns.
func (w *Worker) jobSpend(ctx context.Context, v *view, h int, su engines.Usage) wire.Spend {
	u := v.tally(h)
	u.Searches, u.SearchesCached, u.SearchCostUSD = su.Searches, u.SearchesCached+su.Cached, su.CostUSD
	var priced []string
	hop := map[string]int{}
	for i := 0; i <= h; i++ {
		u.ModelCostUSD += w.turnCost(v, i)
		if t := w.turnSpend(v, i); t.USD > 0 || t.Searches > 0 {
			priced = append(priced, t.Call)
			hop[t.Call] = i
		}
	}
	missing, err := spend.Unsettled(ctx, w.Ledger, v.job.Tenant, priced, time.Now())
	if err != nil {
		w.Log.Warn("chat: reading a job's recorded turns", "job", v.job.ID, "err", err)
	}
	for _, c := range missing {
		w.recordTurn(ctx, v, hop[c])
	}
	u.ModelCostUSD = spend.Round(u.ModelCostUSD)
	u.CostUSD = spend.Round(u.SearchCostUSD + u.ModelCostUSD)
	return u
}
