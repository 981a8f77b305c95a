package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// webhookDeferrals is the key counting how often the delivery with webhook-id msgID,
// about job or batch id, was held back by a fairness cap.
func (k Keys) webhookDeferrals(id, msgID string) string {
	return k.prefix + ":{" + id + "}:whdefer:" + msgID
}

// CountWebhookDeferral counts one hold-back of a webhook delivery (msgID, about job or
// batch id) and returns how many it has had; the count is kept for the store's
// retention. A held-back delivery is redelivered without being attempted, so its
// attempt number is its delivery count less this.
func (s *Webhooks) CountWebhookDeferral(ctx context.Context, id, msgID string) (int, error) {
	key := s.K.webhookDeferrals(id, msgID)
	var n *redis.IntCmd
	_, err := s.r.TxPipelined(ctx, func(p redis.Pipeliner) error {
		n = p.Incr(ctx, key)
		p.PExpire(ctx, key, s.Retention)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("state: counting a webhook hold-back: %w", err)
	}
	return int(n.Val()), nil
}

// WebhookDeferrals returns how often a webhook delivery was held back (0 if never).
func (s *Webhooks) WebhookDeferrals(ctx context.Context, id, msgID string) (int, error) {
	n, err := s.r.Get(ctx, s.K.webhookDeferrals(id, msgID)).Int()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("state: reading webhook hold-backs: %w", err)
	}
	return n, nil
}
