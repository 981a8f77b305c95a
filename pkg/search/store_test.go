package search_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/search/searchtest"
)

// The store the unit tests run on, the Redis one over miniredis, passes the search
// store's conformance suite there too.
func TestMiniredisStoreConformance(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, func(t *testing.T) searchtest.Store { return redistest.Flatten(redistest.Store(t)) })
}
