package state_test

import (
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/chat/chaintest"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The Redis store passes the conformance suite of the chat worker's spend ledger and
// result record on Redis (the consumer's unit tests run it over miniredis).
func TestLedgerConformance(t *testing.T) {
	t.Parallel()
	chaintest.RunLedger(t, func(t *testing.T) chaintest.LedgerStore {
		rdb, prefix := testenv.Redis(t)
		return redistest.Flatten(state.New(rdb, prefix, time.Hour))
	})
}
