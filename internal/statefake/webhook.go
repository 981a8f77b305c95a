package statefake

import (
	"context"
	"slices"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// Webhook secrets, callback states and hold-back counts (state/webhook.go,
// webhookdefer.go, store.go's SetWebhookStatus; batch.go here keeps SetBatchWebhook).

// KeepWebhookSecret implements webhook.Store.
func (m *Memory) KeepWebhookSecret(_ context.Context, id, secret string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.secrets[id]; ok {
		return s, nil
	}
	m.secrets[id] = secret
	return secret, nil
}

// WebhookSecret implements webhook.Store.
func (m *Memory) WebhookSecret(_ context.Context, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.secrets[id]; ok {
		return s, nil
	}
	return "", state.ErrNotFound
}

// ForgetWebhookSecret drops the secret kept for id, as its expiry does.
func (m *Memory) ForgetWebhookSecret(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.secrets, id)
}

// move is setWebhookStatus: cur moves to "to" if it is one of from (any, with none).
func move(cur, to string, from []string) (string, bool) {
	if cur == to || len(from) > 0 && !slices.Contains(from, cur) {
		return cur, false
	}
	return to, true
}

// SetWebhookStatus implements webhook.Store.
func (m *Memory) SetWebhookStatus(_ context.Context, jobID, to string, from ...string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[jobID]
	if !ok {
		return "", false, nil
	}
	now, changed := move(j.WebhookStatus, to, from)
	j.WebhookStatus = now
	return now, changed, nil
}

// JobWebhookStatus implements webhook.Store.
func (m *Memory) JobWebhookStatus(_ context.Context, jobID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j, ok := m.jobs[jobID]; ok {
		return j.WebhookStatus, nil
	}
	return "", nil
}

// CountWebhookDeferral implements webhook.Store.
func (m *Memory) CountWebhookDeferral(_ context.Context, id, msgID string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deferrals[id+"/"+msgID]++
	return m.deferrals[id+"/"+msgID], nil
}

// WebhookDeferrals implements webhook.Store.
func (m *Memory) WebhookDeferrals(_ context.Context, id, msgID string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deferrals[id+"/"+msgID], nil
}
