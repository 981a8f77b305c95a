package chat

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/metrics"
)

// Ledger is the spend ledger the chat worker prices model turns into (state.Store):
// each turn is counted once in its job's, batch's and tenant's spend, however often
// the step that stored it runs; the request's max_cost_usd caps the job's ledger,
// which the search workers reserve against.
type Ledger interface {
	RecordCall(ctx context.Context, jobID, tenant, call string, usd float64, now time.Time) (bool, error)
	UnrecordedCalls(ctx context.Context, tenant string, calls []string, now time.Time) ([]string, error)
	SetRequestCap(ctx context.Context, jobID string, usd float64) error
	RequestSpend(ctx context.Context, jobID string) (usd, capUSD float64, err error)
}

// spendUsage is what a job spent, as its usage record and every protocol's usage
// report it (usage.searchfleet).
type spendUsage struct {
	Searches      int     `json:"searches"`
	SearchCostUSD float64 `json:"search_cost_usd"`
	ModelCostUSD  float64 `json:"model_cost_usd"`
	CostUSD       float64 `json:"cost_usd"`
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

// recordTurn counts hop h's stored turn in the spend ledgers. It is called by the
// worker whose answer was stored, and, when the job completes, for a turn the ledger
// does not have (a worker that died between storing a turn and recording it left it
// to that sweep); the ledgers count each turn once. A failure is logged: the completion
// sweep records it again.
func (w *Worker) recordTurn(ctx context.Context, v *view, h int) float64 {
	cost := w.turnCost(v, h)
	if w.Ledger == nil || cost <= 0 {
		return cost
	}
	fresh, err := w.Ledger.RecordCall(context.WithoutCancel(ctx), v.job.ID, v.job.Tenant, turnCall(v.job.ID, h), cost, time.Now())
	if err != nil {
		w.Log.Warn("chat: recording a model turn's spend", "job", v.job.ID, "hop", h, "err", err)
		return cost
	}
	if fresh {
		w.Metrics.Spend(v.job.Tenant, metrics.SpendModel, v.job.Model, cost)
	}
	return cost
}

// jobSpend records the turns of a completing job that are not in the ledgers yet (a
// worker that died between storing a turn and recording it; one read finds them) and
// sums what the job spent: the searches as its trace counted them, and the turns.
func (w *Worker) jobSpend(ctx context.Context, v *view, h int, searches int, searchCost float64) spendUsage {
	u := spendUsage{Searches: searches, SearchCostUSD: searchCost}
	var priced []string
	hop := map[string]int{}
	for i := 0; i <= h; i++ {
		if cost := w.turnCost(v, i); cost > 0 {
			u.ModelCostUSD += cost
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
	u.ModelCostUSD = roundUSD(u.ModelCostUSD)
	u.CostUSD = roundUSD(u.SearchCostUSD + u.ModelCostUSD)
	return u
}

// roundUSD rounds to the micro-dollar the ledgers count in (no float noise).
func roundUSD(v float64) float64 { return float64(int64(v*1e6+0.5)) / 1e6 }

// withSpend puts the job's spend into its stored Chat answer's usage, as
// usage.searchfleet: the ingress renders it in every protocol.
func withSpend(resp []byte, u spendUsage) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(resp, &top) != nil {
		return resp
	}
	var usage map[string]json.RawMessage
	if json.Unmarshal(top["usage"], &usage) != nil || usage == nil {
		usage = map[string]json.RawMessage{}
	}
	usage["searchfleet"], _ = json.Marshal(u)
	top["usage"], _ = json.Marshal(usage)
	out, err := json.Marshal(top)
	if err != nil {
		return resp
	}
	return out
}
