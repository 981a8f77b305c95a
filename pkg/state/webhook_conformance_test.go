package state_test

import (
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook/webhookstoretest"
)

// The Redis store passes the webhook service's conformance suite on Redis (the
// consumer's unit tests run it over miniredis).
func TestWebhookStoreConformance(t *testing.T) {
	t.Parallel()
	webhookstoretest.Run(t, func(t *testing.T) webhookstoretest.Store {
		rdb, prefix := testenv.Redis(t)
		return redistest.Flatten(state.New(rdb, prefix, time.Hour))
	})
}
