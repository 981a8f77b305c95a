package chat

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Ledger is the spend ledger the chat worker prices model turns into (state.Store):
// each turn's worst case is reserved before the model is called, against its job's
// ledger (the request's max_cost_usd), its batch's and its tenant's budget, and is
// settled to what it cost when the answer is in; each turn is counted once however
// often the step that stored it runs. The search workers reserve against the same
// ledgers.
type Ledger interface {
	// ReserveTurn holds a turn's worst case before the model is called (nil: it fits).
	ReserveTurn(ctx context.Context, jobID, tenant, call string, usd float64, searches int, b state.Budget, ttl time.Duration, now time.Time) (*state.Exhausted, error)
	// SettleTurn sets the turn's real cost, recording it if it holds no reservation.
	SettleTurn(ctx context.Context, jobID, tenant, call string, usd float64, searches int, now time.Time) (bool, error)
	UnrecordedCalls(ctx context.Context, tenant string, calls []string, now time.Time) ([]string, error)
	SetRequestCap(ctx context.Context, jobID string, usd float64) error
	RequestSpend(ctx context.Context, jobID string) (usd, capUSD float64, err error)
}

// requestCap is the request's max_cost_usd (0: none).
func requestCap(v *view) float64 {
	if v.req.Search == nil {
		return 0
	}
	return v.req.Search.MaxCostUSD
}

// openRequestLedger runs before hop h's model call. On the first hop it caps the
// job's ledger at the request's max_cost_usd, before any search can reserve against
// it. On a later hop it reports whether the request's money is spent: that hop is
// then offered no web_search, and the model answers with what it has.
func (w *Worker) openRequestLedger(ctx context.Context, v *view, h int) (spent bool, err error) {
	limit := requestCap(v)
	if w.Ledger == nil || limit <= 0 {
		return false, nil
	}
	if h == 0 {
		return false, w.Ledger.SetRequestCap(ctx, v.job.ID, limit)
	}
	usd, _, err := w.Ledger.RequestSpend(ctx, v.job.ID)
	if err != nil {
		return false, err
	}
	return usd >= limit, nil
}

// Bounds of a model turn's worst case, when nothing tighter is known.
const (
	// bytesPerToken bounds a request's input tokens by its bytes: a token of any
	// tokenizer the fleet meets spans at least this many bytes of the request body
	// (JSON syntax, field names and whitespace included).
	bytesPerToken = 3
	// defaultMaxOutputTokens bounds an answer whose request sets no max_tokens and
	// whose model's pricing sets no maxOutputTokens (the max_tokens the fleet sends
	// Anthropic models when a request has none).
	defaultMaxOutputTokens = 4096
	// fallbackSearchUSD prices a native search whose provider has no known price.
	fallbackSearchUSD = 0.01
)

// worstCase is what hop h's model call can cost at most: its request body's bytes as
// input tokens (bytesPerToken), the request's max_tokens (or the model's
// maxOutputTokens) as output tokens, at the model's prices, plus, when the model may run its provider's
// own search, that search's price times the most searches the job may make.
func (w *Worker) worstCase(v *view, size int, native bool) (usd float64, searches int) {
	m := w.Models[v.job.Model]
	out := v.req.MaxTokens // the answer's bound, in whichever protocol's name the client set it
	if out <= 0 {
		out = m.Pricing.MaxOutputTokens
	}
	if out <= 0 {
		out = defaultMaxOutputTokens
	}
	usd = m.Pricing.Cost(size/bytesPerToken+1, out)
	if native {
		searches = max(w.MaxSearches, 1)
		if o := v.req.Search; o != nil && o.MaxUses > 0 && o.MaxUses < searches {
			searches = o.MaxUses
		}
		usd += float64(searches) * nativeSearchUSD(m)
	}
	return usd, searches
}

// nativeSearchUSD is what one of the model's provider's own searches costs.
func nativeSearchUSD(m Model) float64 {
	if api, ok := upstream.ModelAPIFor(m.Protocol); ok {
		if _, p, ok := api.NativeSearch(m.Upstream); ok && p > 0 {
			return p
		}
	}
	return fallbackSearchUSD
}

// reserveTurn reserves hop h's model call's worst case (worstCase) before it is made,
// against the job's, batch's and tenant's budgets, atomically across workers. It
// reports whether the call may go. A call that does not fit ends the job, failed with
// a budget error (429, insufficient_quota): no model call is made that a budget
// cannot pay. A redelivered step finds its reservation and reserves nothing more; a
// reservation that is never settled (the worker died) lapses after the model's
// timeout and a lease.
func (w *Worker) reserveTurn(ctx context.Context, v *view, h int, size int, native bool) (bool, error) {
	if w.Ledger == nil {
		return true, nil
	}
	usd, searches := w.worstCase(v, size, native)
	if usd <= 0 {
		return true, nil // a free model
	}
	ttl := 2 * (w.ModelTimeout + w.LeaseTTL + time.Minute)
	ex, err := w.Ledger.ReserveTurn(ctx, v.job.ID, v.job.Tenant, turnCall(v.job.ID, h), usd, searches, w.Budgets.For(v.job.Tenant), ttl, time.Now())
	if err != nil {
		return false, err
	}
	if ex == nil {
		return true, nil
	}
	if w.Metrics != nil {
		w.Metrics.BudgetExhausted.WithLabelValues(v.job.Tenant, ex.Budget).Inc()
	}
	msg := fmt.Sprintf("The %s cannot pay for the model's next turn (up to $%s); no model call was made.", ex.Describe(), strconv.FormatFloat(spend.Round(usd), 'f', -1, 64))
	if !ex.Reset.IsZero() {
		msg += " It resets at " + ex.Reset.Format(time.RFC3339) + "."
	}
	return false, w.fail(ctx, v.job.ID, &state.JobError{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "budget_exhausted", Message: msg})
}

// turnCall names hop h's model turn in the spend ledgers: one entry per job and hop.
func turnCall(jobID string, h int) string { return jobID + ":" + strconv.Itoa(h) + "@model" }

// turnCost prices hop h's stored turn at its model's token prices.
func (w *Worker) turnCost(v *view, h int) float64 {
	t, ok := v.turn(h)
	if !ok {
		return 0
	}
	return w.Models[v.job.Model].Pricing.Cost(t.Usage.PromptTokens, t.Usage.CompletionTokens)
}

// turnSpend is what hop h's stored turn cost in all: its tokens and its native
// searches (their number and price).
func (w *Worker) turnSpend(v *view, h int) (usd float64, searches int) {
	usd = w.turnCost(v, h)
	t, _ := v.turn(h)
	if n := native(t); n != nil {
		usd, searches = spend.Round(usd+n.CostUSD), n.Requests
	}
	return usd, searches
}

// recordTurn settles hop h's stored turn in the spend ledgers to what it cost (its
// reservation, if it has one, becomes that cost). It is called by the worker whose
// answer was stored, and, when the job completes, for a turn the ledger does not hold
// settled (a worker that died between storing a turn and settling it left it to that
// sweep); the ledgers count each turn once. A failure is logged: the completion sweep
// settles it again.
func (w *Worker) recordTurn(ctx context.Context, v *view, h int) float64 {
	cost, searches := w.turnSpend(v, h)
	if w.Ledger == nil || cost <= 0 && searches == 0 {
		return cost
	}
	fresh, err := w.Ledger.SettleTurn(context.WithoutCancel(ctx), v.job.ID, v.job.Tenant, turnCall(v.job.ID, h), cost, searches, time.Now())
	if err != nil {
		w.Log.Warn("chat: settling a model turn's spend", "job", v.job.ID, "hop", h, "err", err)
		return cost
	}
	if fresh {
		w.Metrics.Spend(v.job.Tenant, metrics.SpendModel, v.job.Model, cost)
	}
	return cost
}

// jobSpend records the turns of a completing job that are not in the ledgers yet (a
// worker that died between storing a turn and recording it; one read finds them) and
// sums what the job spent, as its usage record and every protocol's usage report it
// (usage.searchfleet): the searches as its trace counted them (su), its calls
// answered from a record and its fetches (tally), and the turns.
func (w *Worker) jobSpend(ctx context.Context, v *view, h int, su engines.Usage) wire.Spend {
	u := v.tally(h)
	u.Searches, u.SearchesCached, u.SearchCostUSD = su.Searches, u.SearchesCached+su.Cached, su.CostUSD
	var priced []string
	hop := map[string]int{}
	for i := 0; i <= h; i++ {
		cost := w.turnCost(v, i)
		u.ModelCostUSD += cost
		if all, searches := w.turnSpend(v, i); all > 0 || searches > 0 {
			priced = append(priced, turnCall(v.job.ID, i))
			hop[priced[len(priced)-1]] = i
		}
	}
	if w.Ledger != nil && len(priced) > 0 {
		missing, err := w.Ledger.UnrecordedCalls(context.WithoutCancel(ctx), v.job.Tenant, priced, time.Now())
		if err != nil {
			w.Log.Warn("chat: reading a job's recorded turns", "job", v.job.ID, "err", err)
			missing = priced // record them all: each is counted once
		}
		for _, c := range missing {
			w.recordTurn(ctx, v, hop[c])
		}
	}
	u.ModelCostUSD = spend.Round(u.ModelCostUSD)
	u.CostUSD = spend.Round(u.SearchCostUSD + u.ModelCostUSD)
	return u
}
