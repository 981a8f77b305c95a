package state_test

import (
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/search/searchtest"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The Redis store passes the search workers' conformance suite on Redis (the
// consumer's unit tests run it over miniredis).
func TestSearchStoreConformance(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, func(t *testing.T) searchtest.Store {
		rdb, prefix := testenv.Redis(t)
		return redistest.Flatten(state.New(rdb, prefix, time.Hour))
	})
}

// So does it as it writes across a cluster's slots (no script touches two slots:
// a search's tenant part is reserved apart from its job's).
func TestSearchStoreConformanceAsCluster(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, func(t *testing.T) searchtest.Store {
		rdb, prefix := testenv.Redis(t)
		return redistest.Flatten(state.AsCluster(state.New(rdb, prefix, time.Hour)))
	})
}
