package batch_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/batch/batchstoretest"
)

// The store the unit tests run on, the Redis one over miniredis, passes the batch
// store's conformance suite there too.
func TestMiniredisStoreConformance(t *testing.T) {
	t.Parallel()
	batchstoretest.Run(t, func(t *testing.T) batchstoretest.Store { return redistest.Flatten(redistest.Store(t)) })
}
