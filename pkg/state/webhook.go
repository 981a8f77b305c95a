package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// keepSecret stores a webhook secret unless one is stored.
// (lua/keep_webhook_secret.lua)
var keepSecret = script("keep_webhook_secret")

// KeepWebhookSecret keeps the callback signing secret made for a job or batch (whose
// tenant has none) for the store's retention, apart from the record, which must never
// hold a secret. The first secret stored for an id stays: it returns the stored one,
// so a replayed submission shows its client the secret its webhooks are signed with.
func (s *Webhooks) KeepWebhookSecret(ctx context.Context, id, secret string) (string, error) {
	sec, err := keepSecret.Run(ctx, s.r, []string{s.K.WebhookSecret(id)}, secret, s.Retention.Milliseconds()).Text()
	if err != nil {
		return "", fmt.Errorf("state: storing a signing secret: %w", err)
	}
	return sec, nil
}

// WebhookSecret reads the signing secret made for a job or batch; ErrNotFound when
// none was made or it expired. Errors never contain the secret.
func (s *Webhooks) WebhookSecret(ctx context.Context, id string) (string, error) {
	sec, err := s.r.Get(ctx, s.K.WebhookSecret(id)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", ErrNotFound
	case err != nil:
		return "", fmt.Errorf("state: reading a signing secret: %w", err)
	}
	return sec, nil
}

// JobWebhookStatus reads a job's webhook status ("" when it has none, or the job is
// gone).
func (s *Webhooks) JobWebhookStatus(ctx context.Context, jobID string) (string, error) {
	st, err := s.r.HGet(ctx, s.K.Job(jobID), "webhook").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("state: reading job %s webhook status: %w", jobID, err)
	}
	return st, nil
}

// JobFields returns a job record's fields exactly as stored, for checks of what a
// record holds (that no secret reached it); read jobs with GetJob.
func (s *Jobs) JobFields(ctx context.Context, jobID string) (map[string]string, error) {
	return s.r.HGetAll(ctx, s.K.Job(jobID)).Result()
}
