package webhook

import (
	"context"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// Store is what the webhook service keeps: signing secrets, the delivery state of
// each job's and batch's callback, and how often a delivery was held back.
// *state.Store is the Redis one, and pkg/state's webhook_conformance_test.go is the
// conformance suite it passes.
type Store interface {
	// KeepWebhookSecret keeps the secret made for a job or batch unless one is kept,
	// and returns the kept one; WebhookSecret reads it (state.ErrNotFound: none).
	KeepWebhookSecret(ctx context.Context, id, secret string) (string, error)
	WebhookSecret(ctx context.Context, id string) (string, error)
	// SetWebhookStatus moves a job's callback state to "to" if it is now one of from
	// (any, when from is empty), atomically; it returns the state after the call and
	// whether it changed ("" when the job is gone, which stays gone).
	SetWebhookStatus(ctx context.Context, jobID, to string, from ...string) (string, bool, error)
	// JobWebhookStatus reads a job's callback state ("" for none, or no job).
	JobWebhookStatus(ctx context.Context, jobID string) (string, error)
	// SetBatchWebhook is SetWebhookStatus for a batch.
	SetBatchWebhook(ctx context.Context, id, to string, from ...string) error
	// CountWebhookDeferral counts one hold-back of a delivery and returns how many it
	// has had; WebhookDeferrals reads that count (0: never).
	CountWebhookDeferral(ctx context.Context, id, msgID string) (int, error)
	WebhookDeferrals(ctx context.Context, id, msgID string) (int, error)
}

var _ Store = (*state.Webhooks)(nil)
