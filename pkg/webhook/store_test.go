package webhook_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/webhook/webhookstoretest"
)

// The store the unit tests run on, the Redis one over miniredis, passes the webhook
// store's conformance suite there too.
func TestMiniredisStoreConformance(t *testing.T) {
	t.Parallel()
	webhookstoretest.Run(t, func(t *testing.T) webhookstoretest.Store { return redistest.Flatten(redistest.Store(t)) })
}
