package chat_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/chat/chaintest"
)

// The in-memory store the unit tests run on passes the same conformance suite as the
// Redis one (pkg/state), so the unit tests rely on nothing Redis does not do.
func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	chaintest.Run(t, func(*testing.T) chaintest.Store { return chaintest.NewMemory() })
}
