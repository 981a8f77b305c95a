package state_test

import (
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/chat/chaintest"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The Redis store passes the chat chain's conformance suite on Redis (the
// consumer's unit tests run it over miniredis).
func TestChainStoreConformance(t *testing.T) {
	t.Parallel()
	chaintest.Run(t, func(t *testing.T) chaintest.Store {
		rdb, prefix := testenv.Redis(t)
		return redistest.Flatten(state.New(rdb, prefix, time.Hour))
	})
}
