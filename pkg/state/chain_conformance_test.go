package state_test

import (
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testenv"
	"github.com/searchfleet/searchfleet/pkg/chat/chaintest"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The Redis store passes the chat chain's conformance suite (so does the in-memory
// one the chat worker's unit tests use).
func TestChainStoreConformance(t *testing.T) {
	t.Parallel()
	chaintest.Run(t, func(t *testing.T) chaintest.Store {
		rdb, prefix := testenv.Redis(t)
		return state.Flatten(state.New(rdb, prefix, time.Hour))
	})
}
