package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The conformance suites (chain, ledger, batch, search, webhook) hold the store to
// what each of its consumers relies on, as the consumer's port names it. Each runs on
// every backend the store meets: Redis, Redis as a cluster writes to it (no script
// touches keys of two slots), and miniredis, which the workers' unit tests run the
// store over (internal/testkit/redistest).
var backends = []struct {
	name  string
	store func(t *testing.T) *state.Store
}{
	{"redis", func(t *testing.T) *state.Store {
		rdb, prefix := testenv.Redis(t)
		return state.New(rdb, prefix, time.Hour)
	}},
	{"cluster", func(t *testing.T) *state.Store {
		rdb, prefix := testenv.Redis(t)
		return state.AsCluster(state.New(rdb, prefix, time.Hour))
	}},
	{"miniredis", func(t *testing.T) *state.Store { return redistest.Store(t) }},
}

// flat is every aggregate of a store in one value: each suite takes it as the one
// store interface it is written against. Workers take the aggregate their port names.
type flat struct {
	*state.Jobs
	*state.Chains
	*state.Searches
	*state.Batches
	*state.Files
	*state.Ledger
	*state.Leases
	*state.Webhooks
}

// conformCase is one case of a conformance suite, run on an empty store of its own.
type conformCase[S any] struct {
	name string
	run  func(t *testing.T, s S)
}

// conform runs a suite's cases on every backend, in parallel. as is the store as the
// suite sees it.
func conform[S any](t *testing.T, as func(flat) S, cases []conformCase[S]) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					st := b.store(t)
					c.run(t, as(flat{st.Jobs, st.Chains, st.Searches, st.Batches, st.Files, st.Ledger, st.Leases, st.Webhooks}))
				})
			}
		})
	}
}

// wantSpend fails t unless tenant's spend this day and this month is usd over n
// searches.
func wantSpend(t *testing.T, s interface {
	SpendOf(ctx context.Context, tenant string, now time.Time) (spend.Spend, error)
}, tenant string, usd float64, n int64) {
	t.Helper()
	sp, err := s.SpendOf(context.Background(), tenant, time.Now())
	if err != nil || sp.DayUSD != usd || sp.MonthUSD != usd || sp.DaySearches != n || sp.MonthSearches != n {
		t.Fatalf("tenant spend %+v (%v), want $%v and %d searches in the day and month", sp, err, usd, n)
	}
}

func eventually(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
