package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// webhookStore is a webhook store a test can put jobs and batches in.
type webhookStore interface {
	webhook.Store
	CreateJob(ctx context.Context, j *state.Job) error
	GetJob(ctx context.Context, id string) (*state.Job, error)
	CreateBatch(ctx context.Context, b *state.Batch, customIDs []string) error
	GetBatch(ctx context.Context, id string) (*state.Batch, error)
}

// TestWebhookStoreConformance is the conformance suite of the webhook service's store
// (webhook.Store).
func TestWebhookStoreConformance(t *testing.T) {
	conform(t, func(s flat) webhookStore { return s }, []conformCase[webhookStore]{
		{"SecretFirstWriteWins", secretFirstWriteWins},
		{"JobStatusMovesFromListed", jobStatusMoves},
		{"GoneJobStaysGone", goneJob},
		{"BatchStatus", batchStatus},
		{"DeferralsCounted", deferrals},
	})
}

func secretFirstWriteWins(t *testing.T, s webhookStore) {
	ctx := context.Background()
	if _, err := s.WebhookSecret(ctx, "j"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("no secret yet: %v", err)
	}
	for _, sec := range []string{"whsec_one", "whsec_two"} {
		if got, err := s.KeepWebhookSecret(ctx, "j", sec); err != nil || got != "whsec_one" {
			t.Fatalf("KeepWebhookSecret(%s) = %q %v, want the first", sec, got, err)
		}
	}
	if got, err := s.WebhookSecret(ctx, "j"); err != nil || got != "whsec_one" {
		t.Fatalf("WebhookSecret %q %v", got, err)
	}
	if _, err := s.WebhookSecret(ctx, "batch_1"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("another id's secret: %v", err)
	}
}

func jobStatusMoves(t *testing.T, s webhookStore) {
	ctx := context.Background()
	if err := s.CreateJob(ctx, &state.Job{ID: "j", Kind: "chat", Model: "m", Request: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.JobWebhookStatus(ctx, "j"); err != nil || st != "" {
		t.Fatalf("a new job's status %q %v", st, err)
	}
	steps := []struct {
		to, want string
		from     []string
		changed  bool
	}{
		{"pending", "pending", []string{""}, true},
		{"pending", "pending", []string{"", "pending"}, false}, // already there
		{"", "pending", []string{""}, false},                   // not from a listed state
		{"delivered", "delivered", []string{"pending"}, true},
		{"pending", "delivered", []string{"", "pending"}, false}, // a late finalizer never overwrites
		{"failed", "failed", nil, true},                          // any state, with none listed
	}
	for i, st := range steps {
		now, changed, err := s.SetWebhookStatus(ctx, "j", st.to, st.from...)
		if err != nil || now != st.want || changed != st.changed {
			t.Fatalf("step %d (%q from %q): %q %v %v, want %q %v", i, st.to, st.from, now, changed, err, st.want, st.changed)
		}
		if got, _ := s.JobWebhookStatus(ctx, "j"); got != st.want {
			t.Fatalf("step %d: stored %q", i, got)
		}
	}
	if j, err := s.GetJob(ctx, "j"); err != nil || j.WebhookStatus != "failed" {
		t.Fatalf("the job record's webhook status %+v %v", j, err)
	}
	// Concurrent movers from "" to "pending": exactly one moves it.
	if err := s.CreateJob(ctx, &state.Job{ID: "k", Kind: "chat", Model: "m", Request: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved := 0
	for range 8 {
		wg.Go(func() {
			if _, changed, _ := s.SetWebhookStatus(ctx, "k", "pending", ""); changed {
				mu.Lock()
				moved++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if moved != 1 {
		t.Fatalf("%d movers changed the status, want 1", moved)
	}
}

func goneJob(t *testing.T, s webhookStore) {
	ctx := context.Background()
	if now, changed, err := s.SetWebhookStatus(ctx, "gone", "pending"); err != nil || now != "" || changed {
		t.Fatalf("a job that is gone: %q %v %v", now, changed, err)
	}
	if _, err := s.GetJob(ctx, "gone"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a gone job was recreated: %v", err)
	}
	if st, err := s.JobWebhookStatus(ctx, "gone"); err != nil || st != "" {
		t.Fatalf("status of a gone job %q %v", st, err)
	}
}

func batchStatus(t *testing.T, s webhookStore) {
	ctx := context.Background()
	now := time.Now()
	b := &state.Batch{ID: "batch_1", Tenant: "acme", Status: "completed", Created: now, Expires: now.Add(time.Hour)}
	if err := s.CreateBatch(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	wantHook := func(want string) {
		t.Helper()
		got, err := s.GetBatch(ctx, "batch_1")
		if err != nil || got.Webhook != want {
			t.Fatalf("batch webhook %+v %v, want %q", got, err, want)
		}
	}
	wantHook("")
	if err := s.SetBatchWebhook(ctx, "batch_1", "pending", ""); err != nil {
		t.Fatal(err)
	}
	wantHook("pending")
	if err := s.SetBatchWebhook(ctx, "batch_1", "delivered", "pending"); err != nil {
		t.Fatal(err)
	}
	wantHook("delivered")
	if err := s.SetBatchWebhook(ctx, "batch_1", "pending", "", "pending"); err != nil {
		t.Fatal(err)
	}
	wantHook("delivered")
	if err := s.SetBatchWebhook(ctx, "batch_gone", "pending"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBatch(ctx, "batch_gone"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a gone batch was recreated: %v", err)
	}
}

func deferrals(t *testing.T, s webhookStore) {
	ctx := context.Background()
	if n, err := s.WebhookDeferrals(ctx, "j", "msg_1"); err != nil || n != 0 {
		t.Fatalf("never held back: %d %v", n, err)
	}
	for want := 1; want <= 3; want++ {
		if n, err := s.CountWebhookDeferral(ctx, "j", "msg_1"); err != nil || n != want {
			t.Fatalf("count %d: %d %v", want, n, err)
		}
	}
	if n, _ := s.WebhookDeferrals(ctx, "j", "msg_1"); n != 3 {
		t.Fatalf("read %d, want 3", n)
	}
	if n, _ := s.WebhookDeferrals(ctx, "j", "msg_2"); n != 0 {
		t.Fatalf("another delivery's count %d", n)
	}
}
