package chat_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/chat/chaintest"
)

// The store the unit tests run on, the Redis one over miniredis, passes the chain
// store's conformance suite there too.
func TestMiniredisStoreConformance(t *testing.T) {
	t.Parallel()
	chaintest.Run(t, func(t *testing.T) chaintest.Store { return redistest.Flatten(redistest.Store(t)) })
}

func TestMiniredisLedgerConformance(t *testing.T) {
	t.Parallel()
	chaintest.RunLedger(t, func(t *testing.T) chaintest.LedgerStore { return redistest.Flatten(redistest.Store(t)) })
}
