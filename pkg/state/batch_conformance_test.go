package state_test

import (
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testenv"
	"github.com/searchfleet/searchfleet/pkg/batch/batchstoretest"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The Redis store passes the batch service's conformance suite (so does
// statefake.Memory, which its unit tests use).
func TestBatchStoreConformance(t *testing.T) {
	t.Parallel()
	batchstoretest.Run(t, func(t *testing.T) batchstoretest.Store {
		rdb, prefix := testenv.Redis(t)
		return state.Flatten(state.New(rdb, prefix, time.Hour))
	})
}
