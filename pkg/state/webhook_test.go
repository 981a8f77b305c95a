package state_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// A signing secret is kept apart from the job record; a job's webhook status reads
// back as set; the search cache returns what it stored; Ping answers.
func TestWebhookSecretsAndSearchCache(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	if _, err := s.Webhooks.WebhookSecret(ctx, "job_x"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("no secret: %v", err)
	}
	if sec, err := s.Webhooks.KeepWebhookSecret(ctx, "job_x", "whsec_c2VjcmV0"); err != nil || sec != "whsec_c2VjcmV0" {
		t.Fatalf("first secret %q %v", sec, err)
	}
	if sec, err := s.Webhooks.KeepWebhookSecret(ctx, "job_x", "whsec_b3RoZXI="); err != nil || sec != "whsec_c2VjcmV0" {
		t.Fatalf("a second secret replaced the first: %q %v", sec, err)
	}
	if sec, err := s.Webhooks.WebhookSecret(ctx, "job_x"); err != nil || sec != "whsec_c2VjcmV0" {
		t.Fatalf("secret %q %v", sec, err)
	}
	j := &state.Job{ID: "job_x", Kind: "chat", Request: json.RawMessage(`{}`), Deadline: time.Now().Add(time.Minute)}
	if err := s.Jobs.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Webhooks.JobWebhookStatus(ctx, "job_x"); st != "" || err != nil {
		t.Errorf("webhook status before %q %v", st, err)
	}
	s.Webhooks.SetWebhookStatus(ctx, "job_x", "pending")
	if st, _ := s.Webhooks.JobWebhookStatus(ctx, "job_x"); st != "pending" {
		t.Errorf("webhook status %q", st)
	}
	if st, err := s.Webhooks.JobWebhookStatus(ctx, "job_gone"); st != "" || err != nil {
		t.Errorf("webhook status of a gone job %q %v", st, err)
	}
	fields, err := s.Jobs.JobFields(ctx, "job_x")
	if err != nil || fields["id"] != "job_x" {
		t.Fatalf("fields %v %v", fields, err)
	}
	for k, v := range fields {
		if strings.Contains(v, "whsec_") {
			t.Errorf("field %s holds the secret", k)
		}
	}

	if _, err := s.Searches.CachedSearch(ctx, "t1", "brave", "h1"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("empty cache: %v", err)
	}
	if err := s.Searches.CacheSearch(ctx, "t1", "brave", "h1", []byte(`{"hits":[]}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Searches.CachedSearch(ctx, "t1", "brave", "h1"); err != nil || string(b) != `{"hits":[]}` {
		t.Errorf("cached %s %v", b, err)
	}
	if _, err := s.Searches.CachedSearch(ctx, "t1", "tavily", "h1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("another engine's cache: %v", err)
	}
	if _, err := s.Searches.CachedSearch(ctx, "t2", "brave", "h1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("another tenant's cache: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Error(err)
	}
}
