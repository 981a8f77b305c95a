package state_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

func newBatch(t *testing.T, s *state.Store, tenant string, lines int) *state.Batch {
	t.Helper()
	now := time.Now().UTC()
	b := &state.Batch{ID: state.NewID("batch_"), Tenant: tenant, Status: state.BatchValidating, Endpoint: "/v1/chat/completions",
		Window: "24h", Model: "m1", Metadata: map[string]string{"run": "t"}, Created: now, Expires: now.Add(time.Hour), Total: lines}
	ids := make([]string, lines)
	for i := range ids {
		ids[i] = "q-" + string(rune('a'+i))
	}
	if err := s.Batches.CreateBatch(t.Context(), b, ids); err != nil {
		t.Fatal(err)
	}
	return b
}

// A batch is stored and read back; its custom ids are kept by line; it is active and
// listed for its tenant until it finishes.
func TestBatchRecord(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	b := newBatch(t, s, "acme", 3)
	got, err := s.Batches.GetBatch(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != state.BatchValidating || got.Tenant != "acme" || got.Total != 3 || got.Metadata["run"] != "t" ||
		!got.Expires.Equal(b.Expires.Truncate(time.Millisecond)) || got.ProgressAt.IsZero() {
		t.Fatalf("batch %+v", got)
	}
	if st, _ := s.Batches.BatchStatus(ctx, b.ID); st != state.BatchValidating {
		t.Errorf("status %q", st)
	}
	ids, err := s.Batches.BatchCustomIDs(ctx, b.ID)
	if err != nil || len(ids) != 3 || ids[2] != "q-c" {
		t.Errorf("custom ids %v %v", ids, err)
	}
	if active, _ := s.Batches.ActiveBatches(ctx); !slices.Contains(active, b.ID) {
		t.Errorf("active %v", active)
	}
	if _, err := s.Batches.GetBatch(ctx, "batch_nope"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("missing batch: %v", err)
	}
	if st, err := s.Batches.BatchStatus(ctx, "batch_nope"); st != "" || err != nil {
		t.Errorf("missing batch status %q %v", st, err)
	}
}

// Lines are counted once each; the cursor never moves back; the last outcome of a
// fully expanded batch resolves it (once), and it moves to finalizing.
func TestBatchCounting(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	b := newBatch(t, s, "acme", 3)
	if resolved, err := s.Batches.AdvanceBatch(ctx, b.ID, 2, false); err != nil || resolved {
		t.Fatal(resolved, err)
	}
	s.Batches.AdvanceBatch(ctx, b.ID, 1, false) // never back
	got, _ := s.Batches.GetBatch(ctx, b.ID)
	if got.Status != state.BatchInProgress || got.Expanded != 2 || got.InProgressAt.IsZero() || got.ExpandDone {
		t.Fatalf("after advancing %+v", got)
	}
	count := func(i int, outcome string) bool {
		t.Helper()
		resolved, err := s.Batches.CountBatchLine(ctx, b.ID, i, outcome)
		if err != nil {
			t.Fatal(err)
		}
		return resolved
	}
	if count(0, state.LineCompleted) || count(0, state.LineFailed) || count(1, state.LineFailed) {
		t.Fatal("resolved before expansion was done")
	}
	if resolved, _ := s.Batches.AdvanceBatch(ctx, b.ID, 3, true); resolved {
		t.Fatal("resolved with line 2 open")
	}
	if !count(2, state.LineExpired) {
		t.Fatal("the last line did not resolve the batch")
	}
	if count(2, state.LineExpired) {
		t.Fatal("a recount resolved the batch again")
	}
	got, _ = s.Batches.GetBatch(ctx, b.ID)
	if got.Status != state.BatchFinalizing || got.Completed != 1 || got.Failed != 1 || got.Ended != 3 || !got.Resolved() {
		t.Fatalf("resolved batch %+v", got)
	}
	done, err := s.Batches.BatchOutcomes(ctx, b.ID)
	if err != nil || done[0] != state.LineCompleted || done[1] != state.LineFailed || done[2] != state.LineExpired {
		t.Errorf("outcomes %v %v", done, err)
	}
	if resolved, err := s.Batches.CountBatchLine(ctx, "batch_nope", 0, state.LineCompleted); resolved || err != nil {
		t.Errorf("counting a missing batch: %v %v", resolved, err)
	}
}

// Cancelling moves a running batch to cancelling once; a batch ends once, leaves the
// active set and keeps what it ended with.
func TestBatchCancelAndFinish(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	b := newBatch(t, s, "acme", 1)
	for range 2 {
		if st, err := s.Batches.CancelBatch(ctx, b.ID); err != nil || st != state.BatchCancelling {
			t.Fatalf("cancel: %q %v", st, err)
		}
	}
	if st, _ := s.Batches.CancelBatch(ctx, "batch_nope"); st != "" {
		t.Errorf("cancelling a missing batch: %q", st)
	}
	moved, err := s.Batches.FinishBatch(ctx, b.ID, state.BatchCancelled, state.BatchEnd{ErrorFileID: "file-x"})
	if err != nil || !moved {
		t.Fatal(moved, err)
	}
	if moved, _ := s.Batches.FinishBatch(ctx, b.ID, state.BatchFailed, state.BatchEnd{Errors: []state.BatchError{{Code: "late"}}}); moved {
		t.Fatal("an ended batch ended again")
	}
	got, _ := s.Batches.GetBatch(ctx, b.ID)
	if got.Status != state.BatchCancelled || got.CancelledAt.IsZero() || got.CancellingAt.IsZero() || got.ErrorFileID != "file-x" || len(got.Errors) != 0 {
		t.Fatalf("finished %+v", got)
	}
	if st, _ := s.Batches.CancelBatch(ctx, b.ID); st != state.BatchCancelled {
		t.Errorf("cancelling an ended batch: %q", st)
	}
	if active, _ := s.Batches.ActiveBatches(ctx); slices.Contains(active, b.ID) {
		t.Error("an ended batch is still active")
	}

	f := newBatch(t, s, "acme", 1)
	line := 0
	errs := []state.BatchError{{Code: "expansion_failed", Message: "boom", Line: &line}}
	if moved, _ := s.Batches.FinishBatch(ctx, f.ID, state.BatchFailed, state.BatchEnd{Errors: errs}); !moved {
		t.Fatal("failing refused")
	}
	got, _ = s.Batches.GetBatch(ctx, f.ID)
	if got.Status != state.BatchFailed || got.FailedAt.IsZero() || len(got.Errors) != 1 || got.Errors[0].Code != "expansion_failed" || *got.Errors[0].Line != 0 {
		t.Fatalf("failed %+v", got)
	}
}

// A batch's webhook status is recorded while the batch exists, and a gone batch is
// not recreated by it.
func TestBatchWebhook(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	b := newBatch(t, s, "acme", 1)
	if err := s.Webhooks.SetBatchWebhook(ctx, b.ID, "delivered"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Batches.GetBatch(ctx, b.ID); got.Webhook != "delivered" {
		t.Errorf("webhook %q", got.Webhook)
	}
	// The finalizer records "pending" after queueing the delivery; a delivery that
	// settled first keeps its outcome, and a failure does not replace a delivery.
	if err := s.Webhooks.SetBatchWebhook(ctx, b.ID, "pending", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Webhooks.SetBatchWebhook(ctx, b.ID, "failed", "", "pending"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Batches.GetBatch(ctx, b.ID); got.Webhook != "delivered" {
		t.Errorf("webhook %q after a late pending and failed, want delivered", got.Webhook)
	}
	fresh := newBatch(t, s, "acme", 1)
	if err := s.Webhooks.SetBatchWebhook(ctx, fresh.ID, "pending", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Batches.GetBatch(ctx, fresh.ID); got.Webhook != "pending" {
		t.Errorf("webhook %q, want pending", got.Webhook)
	}
	if err := s.Webhooks.SetBatchWebhook(ctx, "batch_gone", "failed"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Batches.GetBatch(ctx, "batch_gone"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("a gone batch came back: %v", err)
	}
}

// A tenant's batches are listed newest first, from after a cursor, across pages;
// a forgotten one is not listed.
func TestTenantBatchesIndex(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	var ids []string
	for range 205 { // more than one page
		ids = append(ids, newBatch(t, s, "acme", 1).ID)
		time.Sleep(time.Millisecond) // distinct creation times
	}
	newBatch(t, s, "other", 1)
	slices.Reverse(ids)
	if got := collect(t, s.Batches.TenantBatches(ctx, "acme", "")); !slices.Equal(got, ids) {
		t.Fatalf("listed %d, want %d newest first", len(got), len(ids))
	}
	if got := collect(t, s.Batches.TenantBatches(ctx, "acme", ids[200])); !slices.Equal(got, ids[201:]) {
		t.Errorf("after a cursor: %v", got)
	}
	if got := collect(t, s.Batches.TenantBatches(ctx, "acme", "batch_unknown")); len(got) != 0 {
		t.Errorf("after an unknown cursor: %v", got)
	}
	s.Batches.ForgetTenantBatch(ctx, "acme", ids[0])
	if got := collect(t, s.Batches.TenantBatches(ctx, "acme", "")); len(got) != 204 || got[0] != ids[1] {
		t.Errorf("after forgetting: %d", len(got))
	}
	s.Batches.ForgetActiveBatch(ctx, ids[0])
	if active, _ := s.Batches.ActiveBatches(ctx); slices.Contains(active, ids[0]) {
		t.Error("a forgotten batch is still active")
	}
}

func collect(t *testing.T, seq func(func(string, error) bool)) []string {
	t.Helper()
	var out []string
	for id, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}
