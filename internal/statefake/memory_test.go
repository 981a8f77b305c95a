package statefake_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/internal/statefake"
	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/batch/batchstoretest"
	"github.com/searchfleet/searchfleet/pkg/chat/chaintest"
	"github.com/searchfleet/searchfleet/pkg/search/searchtest"
	"github.com/searchfleet/searchfleet/pkg/webhook/webhookstoretest"
)

// The fake passes the same suites as the Redis store (pkg/state's tests run them
// there).
func TestLedgerConformance(t *testing.T) {
	t.Parallel()
	chaintest.RunLedger(t, func(*testing.T) chaintest.LedgerStore { return statefake.New() })
}

func TestSearchStoreConformance(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, func(*testing.T) searchtest.Store { return statefake.New() })
}

func TestWebhookStoreConformance(t *testing.T) {
	t.Parallel()
	webhookstoretest.Run(t, func(*testing.T) webhookstoretest.Store { return statefake.New() })
}

func TestChainStoreConformance(t *testing.T) {
	t.Parallel()
	chaintest.Run(t, func(*testing.T) chaintest.Store { return statefake.New() })
}

var _ batch.Store = (*statefake.Memory)(nil)

func TestBatchStoreConformance(t *testing.T) {
	t.Parallel()
	batchstoretest.Run(t, func(*testing.T) batchstoretest.Store { return statefake.New() })
}
