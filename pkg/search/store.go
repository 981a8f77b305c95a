package search

import (
	"context"
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Calls is what a search or fetch worker keeps of one call between deliveries: its
// lease, its stored outcome, and the results recorded for replays. state.Searches is the
// Redis one, and pkg/state's search_conformance_test.go is the conformance suite it passes.
type Calls interface {
	// StartSearch reads a call's stored outcome, its fallback state and its job's
	// status and tenant, and claims the call's lease for owner, in one round trip. A
	// job that does not exist has status "".
	StartSearch(ctx context.Context, id string, h int, call, owner string, ttl time.Duration) (*state.SearchStart, error)
	// KeepSearch keeps owner's lease of a call alive until the returned function is
	// called; with drop set, that also frees it.
	KeepSearch(id string, h int, call, owner string, ttl time.Duration) func(drop bool)
	// SaveSearchDone stores a direct search's outcome: every later StartSearch returns
	// it. With rec, it records rec's result under its address among the job's (and
	// its batch's) recorded results in the same round trip; the first one recorded
	// stays.
	SaveSearchDone(ctx context.Context, id string, h int, call string, b []byte, rec *state.Recording) error
	// SaveSearchResult stores a chain's call's outcome, as SaveSearchDone does, as the
	// chain's result of the call: the first one stored stays, counted among its hop's
	// results in the order stored, so the chat worker's RecordAndLoad reads it instead
	// of writing it again, and the result stored last completes the hop.
	SaveSearchResult(ctx context.Context, id string, h int, call string, b []byte, rec *state.Recording) error
}

// Store is what the search worker needs of the fleet's state: its searches and the
// spend ledgers. Parts is the Redis one.
type Store interface {
	Searches
	Ledger
}

// Parts is a Store made of its two parts (state.Store's Searches and Ledger).
type Parts struct {
	Searches
	Ledger
}

// Searches is what the search worker needs besides Calls: the engines' shared rate
// limits, the per-tenant cache and engine fallback (state.Searches).
type Searches interface {
	Calls
	// ReleaseSearch frees owner's lease of a call at once.
	ReleaseSearch(ctx context.Context, id string, h int, call, owner string) error
	// HandOff records that engine from failed a call and engine to runs it now, unless
	// the call has moved on from from already: the first hand-off wins, and every
	// caller gets the state that stands.
	HandOff(ctx context.Context, id string, h int, call, from, to string, tried []byte) (*state.Fallback, error)
	// CachedSearch reads a tenant's cached result (state.ErrNotFound: none);
	// CacheSearch caches one for ttl. A tenant never reads another's.
	CachedSearch(ctx context.Context, tenant, engine, queryHash string) ([]byte, error)
	CacheSearch(ctx context.Context, tenant, engine, queryHash string, result []byte, ttl time.Duration) error
	// ClaimInflight claims a tenant's search of engine for a query (by its hash) for
	// a call, unless another call holds it (taking over from prev, a holder whose
	// outcome is no use); ReleaseInflight frees a call's claim; CallOutcome reads a
	// call's stored outcome, the result its job recorded under an address, and whether
	// its job runs (state.Searches).
	ClaimInflight(ctx context.Context, tenant, engine, queryHash, job string, h int, call string, ttl time.Duration, prev string) (state.Inflight, error)
	ReleaseInflight(ctx context.Context, tenant, engine, queryHash, job string, h int, call string) error
	CallOutcome(ctx context.Context, id string, h int, call, addr string) (outcome, recorded []byte, live bool, err error)
	// RecordedSearches reads a job's recorded results by address, from its archived
	// record once it has ended (state.Searches).
	RecordedSearches(ctx context.Context, jobID string) (map[string][]byte, error)
	// Allow takes one request from engine's limit shared by every worker: 0 when it
	// may go, else how long to wait.
	Allow(ctx context.Context, engine string, perSecond float64, burst int) (time.Duration, error)
}

// Ledger is the spend ledgers a search's price is held in (state.Ledger).
type Ledger interface {
	// ReserveCall holds a search's price against its job's, batch's and tenant's
	// budgets, once per call; it returns the hold, or the budget that refused it.
	ReserveCall(ctx context.Context, jobID, tenant, call string, usd float64, b spend.Budget, now time.Time) (*state.Hold, *spend.Exhausted, error)
	// SettleCall moves a hold to what the call really cost.
	SettleCall(ctx context.Context, h *state.Hold, usd float64, searches int) error
}

// StoreOf is the Redis Store over st.
func StoreOf(st *state.Store) Parts { return Parts{Searches: st.Searches, Ledger: st.Ledger} }

var _ Store = Parts{}
