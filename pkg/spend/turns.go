package spend

import (
	"context"
	"strconv"
	"time"
)

// A model turn is held before the model is called, as a search is: its worst case
// (WorstCase) against its job's ledger (the request's max_cost_usd), its batch's (the
// batch's cap) and its tenant's day and month, in that order, each atomically across
// workers; a turn one of them refuses is not made (ReserveTurn). When the answer is
// in, the turn is settled to what it cost (SettleTurn), and the job's completion
// settles the turns a dead worker left (Unsettled). Each turn is one entry per job
// and hop (TurnCall), so a redelivered step holds and counts nothing more.

// TurnLedger is where a chain's model turns are held and counted (state.Ledger;
// pkg/state's ledger_conformance_test.go is its conformance suite).
type TurnLedger interface {
	// ReserveTurn holds a turn's worst case before the model is called (nil: it fits).
	ReserveTurn(ctx context.Context, jobID, tenant, call string, usd float64, searches int, b Budget, ttl time.Duration, now time.Time) (*Exhausted, error)
	// SettleTurn sets the turn's real cost, recording it if it holds no reservation.
	SettleTurn(ctx context.Context, jobID, tenant, call string, usd float64, searches int, now time.Time) (bool, error)
	UnrecordedCalls(ctx context.Context, tenant string, calls []string, now time.Time) ([]string, error)
	SetRequestCap(ctx context.Context, jobID string, usd float64) error
	RequestSpend(ctx context.Context, jobID string) (usd, capUSD float64, err error)
}

// Bounds of a model turn's worst case, when nothing tighter is known.
const (
	// BytesPerToken bounds a request's input tokens by its bytes: a token of any
	// tokenizer the fleet meets spans at least this many bytes of the request body
	// (JSON syntax, field names and whitespace included).
	BytesPerToken = 3
	// DefaultMaxOutputTokens bounds an answer whose request sets no max_tokens and
	// whose model's pricing sets no maxOutputTokens (the max_tokens the fleet sends
	// Anthropic models when a request has none).
	DefaultMaxOutputTokens = 4096
	// FallbackSearchUSD prices a native search whose provider has no known price.
	FallbackSearchUSD = 0.01
)

// WorstCase is what one model call can cost at most: its request body's size in
// bytes as input tokens (BytesPerToken), maxTokens (the request's bound; else the
// model's MaxOutputTokens, else DefaultMaxOutputTokens) as output tokens, plus
// searches of the provider's own searches at searchUSD each (FallbackSearchUSD when
// unknown).
func (p Pricing) WorstCase(size, maxTokens, searches int, searchUSD float64) float64 {
	out := maxTokens
	if out <= 0 {
		out = p.MaxOutputTokens
	}
	if out <= 0 {
		out = DefaultMaxOutputTokens
	}
	if searchUSD <= 0 {
		searchUSD = FallbackSearchUSD
	}
	return p.Cost(size/BytesPerToken+1, out) + float64(searches)*searchUSD
}

// Turn is a model turn in the ledgers: its job, tenant and call (TurnCall), and its
// price (its worst case while reserved, its cost when settled) with the provider's
// own searches it counts.
type Turn struct {
	Job, Tenant, Call string
	USD               float64
	Searches          int
}

// TurnCall names hop h's model turn of job in the ledgers.
func TurnCall(job string, h int) string { return job + ":" + strconv.Itoa(h) + "@model" }

// HoldFor is how long a reservation of a call that may take callTimeout, by a worker
// holding a lease of lease, is kept unsettled before it lapses (the worker died).
func HoldFor(callTimeout, lease time.Duration) time.Duration {
	return 2 * (callTimeout + lease + time.Minute)
}

// OpenRequest runs before each model call of a job whose request caps its spend at
// limit (max_cost_usd; 0: none). Before the first (first), it caps the job's ledger,
// before any search can reserve against it; before a later one it reports whether the
// request's money is spent: that call is then offered no web_search.
func OpenRequest(ctx context.Context, l TurnLedger, job string, limit float64, first bool) (spent bool, err error) {
	if l == nil || limit <= 0 {
		return false, nil
	}
	if first {
		return false, l.SetRequestCap(ctx, job, limit)
	}
	usd, _, err := l.RequestSpend(ctx, job)
	return err == nil && usd >= limit, err
}

// ReserveTurn holds t's worst case against budget b and the job's and batch's caps
// for ttl (HoldFor), and returns the budget that refused it (nil: the model may be
// called). A free turn, or a nil ledger, holds nothing.
func ReserveTurn(ctx context.Context, l TurnLedger, b Budget, t Turn, ttl time.Duration, now time.Time) (*Exhausted, error) {
	if l == nil || t.USD <= 0 {
		return nil, nil
	}
	return l.ReserveTurn(ctx, t.Job, t.Tenant, t.Call, t.USD, t.Searches, b, ttl, now)
}

// SettleTurn sets t's cost in every ledger that holds it (its reservation, if it has
// one, becomes that cost; a turn with none is counted), whatever ctx's cancellation.
// It reports whether the cost was new to the tenant's ledger. A free turn, or a nil
// ledger, counts nothing.
func SettleTurn(ctx context.Context, l TurnLedger, t Turn, now time.Time) (fresh bool, err error) {
	if l == nil || t.USD <= 0 && t.Searches == 0 {
		return false, nil
	}
	return l.SettleTurn(context.WithoutCancel(ctx), t.Job, t.Tenant, t.Call, t.USD, t.Searches, now)
}

// Unsettled returns those of a completing job's priced turns (calls) that tenant's
// ledger does not hold settled: a worker that died between storing a turn and
// settling it left them to the completion. When the ledger cannot be read it returns
// them all with the error (each is counted once).
func Unsettled(ctx context.Context, l TurnLedger, tenant string, calls []string, now time.Time) ([]string, error) {
	if l == nil || len(calls) == 0 {
		return nil, nil
	}
	missing, err := l.UnrecordedCalls(context.WithoutCancel(ctx), tenant, calls, now)
	if err != nil {
		return calls, err
	}
	return missing, nil
}
