package state_test

import (
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/batch/batchstoretest"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The Redis store passes the batch service's conformance suite on Redis (the
// consumer's unit tests run it over miniredis).
func TestBatchStoreConformance(t *testing.T) {
	t.Parallel()
	batchstoretest.Run(t, func(t *testing.T) batchstoretest.Store {
		rdb, prefix := testenv.Redis(t)
		return redistest.Flatten(state.New(rdb, prefix, time.Hour))
	})
}
