package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// batchStore is a batch store a test can count a tenant's leases in.
type batchStore interface {
	batch.Store
	LeasesHeld(ctx context.Context, kind, tenant string) (int, error)
}

// TestBatchStoreConformance is the conformance suite of the batch service's store
// (batch.Store).
func TestBatchStoreConformance(t *testing.T) {
	conform(t, func(s flat) batchStore { return s }, []conformCase[batchStore]{
		{"CreateGetList", createGetList},
		{"LinesCountedOnceAndResolved", linesCounted},
		{"ConcurrentLinesResolveOnce", concurrentLines},
		{"CancelOnlyBeforeTheEnd", batchCancel},
		{"FinishFirstWinsTerminalFinal", batchFinish},
		{"BatchExpires", batchExpires},
		{"DriverLease", driverLease},
		{"Files", batchFiles},
		{"FileExpiry", fileExpiry},
		{"TenantLeases", tenantLeases},
		{"ChargeRecord", chargeRecord},
		{"ChargeRecordExpiry", chargeRecordExpiry},
		{"Jobs", jobsRecorded},
	})
}

// suiteBatch records a validating batch of n lines ("cid-<i>") for tenant, created at
// created and ending its window in an hour, and returns it as given.
func suiteBatch(t *testing.T, s batchStore, id, tenant string, n int, created time.Time) *state.Batch {
	t.Helper()
	b := &state.Batch{ID: id, Tenant: tenant, Status: state.BatchValidating, Endpoint: "/v1/chat/completions",
		InputFileID: "file_" + id, Window: "24h", Model: "m1", Metadata: map[string]string{"k": "v"},
		Callback: json.RawMessage(`{"url":"http://127.0.0.1:9/hook"}`), Created: created, Expires: created.Add(time.Hour), Total: n}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "cid-" + string(rune('a'+i))
	}
	if err := s.CreateBatch(context.Background(), b, ids); err != nil {
		t.Fatal(err)
	}
	return b
}

func getBatch(t *testing.T, s batchStore, id string) *state.Batch {
	t.Helper()
	b, err := s.GetBatch(context.Background(), id)
	if err != nil {
		t.Fatalf("GetBatch(%s): %v", id, err)
	}
	return b
}

// ms is t as stored: whole milliseconds, UTC.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

func createGetList(t *testing.T, s batchStore) {
	ctx := context.Background()
	now := time.Now().Add(-time.Minute)
	in := suiteBatch(t, s, "b1", "acme", 3, now.Add(1500*time.Microsecond))
	suiteBatch(t, s, "b2", "acme", 1, now.Add(time.Second))
	suiteBatch(t, s, "b3", "acme", 1, now.Add(2*time.Second))
	suiteBatch(t, s, "b4", "other", 1, now)

	b := getBatch(t, s, "b1")
	if b.ID != "b1" || b.Tenant != "acme" || b.Status != state.BatchValidating || b.Endpoint != in.Endpoint || b.InputFileID != "file_b1" ||
		b.Window != "24h" || b.Model != "m1" || b.Metadata["k"] != "v" || string(b.Callback) != string(in.Callback) || b.Total != 3 {
		t.Fatalf("stored batch %+v", b)
	}
	if !b.Created.Equal(ms(in.Created)) || !b.Expires.Equal(ms(in.Expires)) || !b.ProgressAt.Equal(b.Created) {
		t.Fatalf("times: created %v expires %v progress %v, want %v %v (in ms)", b.Created, b.Expires, b.ProgressAt, in.Created, in.Expires)
	}
	if b.Completed+b.Failed+b.Ended+b.Expanded != 0 || b.ExpandDone || !b.InProgressAt.IsZero() || b.OutputFileID != "" || b.Webhook != "" || b.Errors != nil {
		t.Fatalf("a new batch has progress: %+v", b)
	}
	// The caller's copy is not the store's.
	b.Metadata["k"] = "changed"
	if getBatch(t, s, "b1").Metadata["k"] != "v" {
		t.Fatal("a read batch shares its metadata with the store")
	}
	if st, err := s.BatchStatus(ctx, "b1"); err != nil || st != state.BatchValidating {
		t.Fatalf("BatchStatus %q %v", st, err)
	}
	ids, err := s.BatchCustomIDs(ctx, "b1")
	if err != nil || len(ids) != 3 || ids[0] != "cid-a" || ids[2] != "cid-c" {
		t.Fatalf("custom ids %v %v", ids, err)
	}
	if out, err := s.BatchOutcomes(ctx, "b1"); err != nil || len(out) != 0 {
		t.Fatalf("outcomes of a new batch %v %v", out, err)
	}

	// No such batch.
	if _, err := s.GetBatch(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("GetBatch of none: %v", err)
	}
	if st, err := s.BatchStatus(ctx, "nope"); err != nil || st != "" {
		t.Fatalf("BatchStatus of none %q %v", st, err)
	}
	if ids, err := s.BatchCustomIDs(ctx, "nope"); err != nil || len(ids) != 0 {
		t.Fatalf("custom ids of none %v %v", ids, err)
	}

	// The tenant's list: newest first, from after a cursor; none after an unknown one.
	if got := collect(t, s.TenantBatches(ctx, "acme", "")); !slices.Equal(got, []string{"b3", "b2", "b1"}) {
		t.Fatalf("acme's batches %v", got)
	}
	if got := collect(t, s.TenantBatches(ctx, "acme", "b3")); !slices.Equal(got, []string{"b2", "b1"}) {
		t.Fatalf("after b3 %v", got)
	}
	if got := collect(t, s.TenantBatches(ctx, "acme", "b4")); len(got) != 0 {
		t.Fatalf("after another tenant's batch %v", got)
	}
	if got := collect(t, s.TenantBatches(ctx, "other", "")); !slices.Equal(got, []string{"b4"}) {
		t.Fatalf("other's batches %v", got)
	}
	// Stopping early stops.
	for id := range s.TenantBatches(ctx, "acme", "") {
		if id != "b3" {
			t.Fatalf("first %s", id)
		}
		break
	}
	if err := s.ForgetTenantBatch(ctx, "acme", "b2"); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, s.TenantBatches(ctx, "acme", "")); !slices.Equal(got, []string{"b3", "b1"}) {
		t.Fatalf("after forgetting b2 %v", got)
	}
	if _, err := s.GetBatch(ctx, "b2"); err != nil {
		t.Fatalf("forgetting the list entry removed the batch: %v", err)
	}

	// The active set.
	active, err := s.ActiveBatches(ctx)
	slices.Sort(active)
	if err != nil || !slices.Equal(active, []string{"b1", "b2", "b3", "b4"}) {
		t.Fatalf("active %v %v", active, err)
	}
	if err := s.ForgetActiveBatch(ctx, "b4"); err != nil {
		t.Fatal(err)
	}
	if active, _ := s.ActiveBatches(ctx); slices.Contains(active, "b4") {
		t.Fatalf("b4 still active: %v", active)
	}
}

func linesCounted(t *testing.T, s batchStore) {
	ctx := context.Background()
	suiteBatch(t, s, "b", "acme", 3, time.Now())
	if r, err := s.AdvanceBatch(ctx, "b", 2, false); err != nil || r {
		t.Fatalf("AdvanceBatch %v %v", r, err)
	}
	b := getBatch(t, s, "b")
	if b.Status != state.BatchInProgress || b.InProgressAt.IsZero() || b.Expanded != 2 || b.ExpandDone {
		t.Fatalf("after the first advance %+v", b)
	}
	first := b.InProgressAt
	if r, err := s.AdvanceBatch(ctx, "b", 1, false); err != nil || r {
		t.Fatalf("AdvanceBatch back %v %v", r, err)
	}
	if b := getBatch(t, s, "b"); b.Expanded != 2 || !b.InProgressAt.Equal(first) {
		t.Fatalf("the cursor moved back, or in_progress_at moved: %+v", b)
	}
	steps := []struct {
		line     int
		outcome  string
		resolved bool
	}{
		{0, state.LineCompleted, false},
		{0, state.LineFailed, false}, // counted already: nothing changes
		{1, state.LineFailed, false}, // every expanded line ended, but expansion goes on
	}
	for _, st := range steps {
		if r, err := s.CountBatchLine(ctx, "b", st.line, st.outcome); err != nil || r != st.resolved {
			t.Fatalf("line %d %s: %v %v", st.line, st.outcome, r, err)
		}
	}
	b = getBatch(t, s, "b")
	if b.Completed != 1 || b.Failed != 1 || b.Ended != 2 || b.Status != state.BatchInProgress {
		t.Fatalf("counts %+v", b)
	}
	if out, _ := s.BatchOutcomes(ctx, "b"); len(out) != 2 || out[0] != state.LineCompleted || out[1] != state.LineFailed {
		t.Fatalf("outcomes %v", out)
	}
	if r, err := s.AdvanceBatch(ctx, "b", 3, true); err != nil || r {
		t.Fatalf("expansion done with a line running: %v %v", r, err)
	}
	if b := getBatch(t, s, "b"); !b.ExpandDone || b.Expanded != 3 || b.Resolved() {
		t.Fatalf("after expansion %+v", b)
	}
	before := getBatch(t, s, "b").ProgressAt
	time.Sleep(5 * time.Millisecond)
	if r, err := s.CountBatchLine(ctx, "b", 2, state.LineExpired); err != nil || !r {
		t.Fatalf("the last line did not resolve the batch: %v %v", r, err)
	}
	b = getBatch(t, s, "b")
	if b.Status != state.BatchFinalizing || b.FinalizingAt.IsZero() || b.Ended != 3 || b.Completed != 1 || b.Failed != 1 || !b.ProgressAt.After(before) {
		t.Fatalf("resolved %+v", b)
	}
	if r, _ := s.CountBatchLine(ctx, "b", 2, state.LineExpired); r {
		t.Fatal("a line counted again reported the resolution again")
	}
	// A finalizing batch asked again (a repair) is still resolved.
	if r, err := s.AdvanceBatch(ctx, "b", 3, true); err != nil || !r {
		t.Fatalf("a finalizing batch advanced: %v %v", r, err)
	}
	// Expansion that stops after every line ended resolves too.
	suiteBatch(t, s, "c", "acme", 1, time.Now())
	s.AdvanceBatch(ctx, "c", 1, false)
	if r, _ := s.CountBatchLine(ctx, "c", 0, state.LineCompleted); r {
		t.Fatal("resolved before expansion stopped")
	}
	if r, _ := s.AdvanceBatch(ctx, "c", 1, true); !r {
		t.Fatal("the expansion's end did not resolve the batch")
	}
	if st, _ := s.BatchStatus(ctx, "c"); st != state.BatchFinalizing {
		t.Fatalf("status %s", st)
	}
	// A batch that is not there counts nothing.
	if r, err := s.CountBatchLine(ctx, "nope", 0, state.LineCompleted); err != nil || r {
		t.Fatalf("counting a line of no batch: %v %v", r, err)
	}
	if r, err := s.AdvanceBatch(ctx, "nope", 1, true); err != nil || r {
		t.Fatalf("advancing no batch: %v %v", r, err)
	}
	if _, err := s.GetBatch(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("counting made a batch: %v", err)
	}
}

func concurrentLines(t *testing.T, s batchStore) {
	ctx := context.Background()
	const n = 20
	suiteBatch(t, s, "b", "acme", n, time.Now())
	s.AdvanceBatch(ctx, "b", n, true)
	var resolved atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		for range 2 { // each line's end reported twice
			wg.Go(func() {
				if r, err := s.CountBatchLine(ctx, "b", i, state.LineCompleted); err != nil {
					t.Error(err)
				} else if r {
					resolved.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if resolved.Load() != 1 {
		t.Fatalf("%d callers resolved the batch, want 1", resolved.Load())
	}
	if b := getBatch(t, s, "b"); b.Completed != n || b.Ended != n || b.Status != state.BatchFinalizing {
		t.Fatalf("after every line %+v", b)
	}
}

func batchCancel(t *testing.T, s batchStore) {
	ctx := context.Background()
	suiteBatch(t, s, "b", "acme", 2, time.Now())
	if st, err := s.CancelBatch(ctx, "b"); err != nil || st != state.BatchCancelling {
		t.Fatalf("cancel %q %v", st, err)
	}
	b := getBatch(t, s, "b")
	if b.Status != state.BatchCancelling || b.CancellingAt.IsZero() || !b.ProgressAt.Equal(b.CancellingAt) {
		t.Fatalf("cancelling %+v", b)
	}
	if st, _ := s.CancelBatch(ctx, "b"); st != state.BatchCancelling {
		t.Fatalf("cancelled again: %q", st)
	}
	// A cancelling batch advanced stays cancelling, and resolves.
	if r, _ := s.AdvanceBatch(ctx, "b", 0, true); !r {
		t.Fatal("a cancelling batch with no line running is not resolved")
	}
	if st, _ := s.BatchStatus(ctx, "b"); st != state.BatchCancelling {
		t.Fatalf("status %s", st)
	}
	// In progress: cancelled; finalizing or ended: refused, status unchanged.
	suiteBatch(t, s, "p", "acme", 1, time.Now())
	s.AdvanceBatch(ctx, "p", 1, false)
	if st, _ := s.CancelBatch(ctx, "p"); st != state.BatchCancelling {
		t.Fatalf("cancelling an in-progress batch: %q", st)
	}
	suiteBatch(t, s, "f", "acme", 1, time.Now())
	s.AdvanceBatch(ctx, "f", 1, true)
	s.CountBatchLine(ctx, "f", 0, state.LineCompleted)
	if st, _ := s.CancelBatch(ctx, "f"); st != state.BatchFinalizing {
		t.Fatalf("cancelling a finalizing batch: %q", st)
	}
	if b := getBatch(t, s, "f"); !b.CancellingAt.IsZero() {
		t.Fatalf("a refused cancel left a mark %+v", b)
	}
	s.FinishBatch(ctx, "f", state.BatchCompleted, state.BatchEnd{})
	if st, _ := s.CancelBatch(ctx, "f"); st != state.BatchCompleted {
		t.Fatalf("cancelling a completed batch: %q", st)
	}
	if st, err := s.CancelBatch(ctx, "nope"); err != nil || st != "" {
		t.Fatalf("cancelling no batch %q %v", st, err)
	}
}

func batchFinish(t *testing.T, s batchStore) {
	ctx := context.Background()
	suiteBatch(t, s, "b", "acme", 1, time.Now())
	ok, err := s.FinishBatch(ctx, "b", state.BatchCompleted, state.BatchEnd{OutputFileID: "file_out", ErrorFileID: ""})
	if err != nil || !ok {
		t.Fatalf("FinishBatch %v %v", ok, err)
	}
	b := getBatch(t, s, "b")
	if b.Status != state.BatchCompleted || b.CompletedAt.IsZero() || b.OutputFileID != "file_out" || b.ErrorFileID != "" || !b.ProgressAt.Equal(b.CompletedAt) {
		t.Fatalf("completed %+v", b)
	}
	if active, _ := s.ActiveBatches(ctx); slices.Contains(active, "b") {
		t.Fatal("an ended batch is still active")
	}
	// A final status is final: no other end, no progress, no cancel.
	for _, st := range []string{state.BatchFailed, state.BatchExpired, state.BatchCancelled, state.BatchCompleted} {
		if ok, err := s.FinishBatch(ctx, "b", st, state.BatchEnd{ErrorFileID: "file_err"}); err != nil || ok {
			t.Fatalf("finished again as %s: %v %v", st, ok, err)
		}
	}
	s.AdvanceBatch(ctx, "b", 1, true)
	if b := getBatch(t, s, "b"); b.Status != state.BatchCompleted || b.ErrorFileID != "" || !b.FailedAt.IsZero() {
		t.Fatalf("an ended batch changed %+v", b)
	}
	// Failed, with why.
	suiteBatch(t, s, "f", "acme", 1, time.Now())
	line := 3
	errs := []state.BatchError{{Code: "expansion_failed", Message: "it broke", Line: &line}}
	if ok, _ := s.FinishBatch(ctx, "f", state.BatchFailed, state.BatchEnd{Errors: errs}); !ok {
		t.Fatal("not failed")
	}
	if b := getBatch(t, s, "f"); b.Status != state.BatchFailed || b.FailedAt.IsZero() || len(b.Errors) != 1 || b.Errors[0].Code != "expansion_failed" ||
		b.Errors[0].Line == nil || *b.Errors[0].Line != 3 || b.OutputFileID != "" {
		t.Fatalf("failed %+v", b)
	}
	// Racing ends: exactly one moves the batch, and its status stands.
	suiteBatch(t, s, "r", "acme", 1, time.Now())
	var wg sync.WaitGroup
	var won atomic.Int32
	var winner atomic.Value
	for _, st := range []string{state.BatchCompleted, state.BatchExpired, state.BatchCancelled, state.BatchFailed} {
		wg.Go(func() {
			if ok, _ := s.FinishBatch(ctx, "r", st, state.BatchEnd{}); ok {
				won.Add(1)
				winner.Store(st)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || getBatch(t, s, "r").Status != winner.Load() {
		t.Fatalf("%d ends won; status %s, winner %v", won.Load(), getBatch(t, s, "r").Status, winner.Load())
	}
	if ok, err := s.FinishBatch(ctx, "nope", state.BatchCompleted, state.BatchEnd{}); err != nil || ok {
		t.Fatalf("finishing no batch %v %v", ok, err)
	}
	// The callback state moves as webhook.Store's does; a batch that is gone stays gone.
	if err := s.SetBatchWebhook(ctx, "b", "pending", ""); err != nil {
		t.Fatal(err)
	}
	s.SetBatchWebhook(ctx, "b", "delivered", "pending")
	s.SetBatchWebhook(ctx, "b", "pending", "")
	if w := getBatch(t, s, "b").Webhook; w != "delivered" {
		t.Fatalf("webhook %q", w)
	}
	s.SetBatchWebhook(ctx, "nope", "pending")
	if _, err := s.GetBatch(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("the webhook state made a batch: %v", err)
	}
}

// A batch's record lasts until its window ends plus the retention.
func batchExpires(t *testing.T, s batchStore) {
	ctx := context.Background()
	created := time.Now().Add(-s.RecordRetention() - time.Hour + 400*time.Millisecond)
	suiteBatch(t, s, "b", "acme", 1, created) // its keys have 400ms
	s.CountBatchLine(ctx, "b", 0, state.LineCompleted)
	if _, err := s.GetBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if _, err := s.GetBatch(ctx, "b"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("an expired batch: %v", err)
	}
	if st, _ := s.BatchStatus(ctx, "b"); st != "" {
		t.Fatalf("an expired batch's status %q", st)
	}
	if out, _ := s.BatchOutcomes(ctx, "b"); len(out) != 0 {
		t.Fatalf("an expired batch's outcomes %v", out)
	}
	if ids, _ := s.BatchCustomIDs(ctx, "b"); len(ids) != 0 {
		t.Fatalf("an expired batch's custom ids %v", ids)
	}
	if r, _ := s.CountBatchLine(ctx, "b", 1, state.LineCompleted); r {
		t.Fatal("counted a line of an expired batch")
	}
	// The indexes keep the id until it is forgotten.
	if got := collect(t, s.TenantBatches(ctx, "acme", "")); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("list %v", got)
	}
	if active, _ := s.ActiveBatches(ctx); !slices.Equal(active, []string{"b"}) {
		t.Fatalf("active %v", active)
	}
}

func driverLease(t *testing.T, s batchStore) {
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	release, _, err := s.HoldBatch(ctx, "b", "d1", ttl)
	if err != nil || release == nil {
		t.Fatalf("HoldBatch %v", err)
	}
	time.Sleep(ttl + 200*time.Millisecond) // held past its ttl: kept alive
	other, left, err := s.HoldBatch(ctx, "b", "d2", ttl)
	if err != nil || other != nil || left <= 0 || left > ttl {
		t.Fatalf("a second driver: release %v, left %v, %v", other != nil, left, err)
	}
	if r, _, _ := s.HoldBatch(ctx, "c", "d2", ttl); r == nil {
		t.Fatal("another batch's lease is apart")
	} else {
		r(true)
	}
	release(true) // dropped: free at once
	release(true) // and again: nothing
	other, _, err = s.HoldBatch(ctx, "b", "d2", ttl)
	if err != nil || other == nil {
		t.Fatalf("a dropped lease still holds: %v", err)
	}
	other(false) // released without drop: it lapses after ttl
	if r, _, _ := s.HoldBatch(ctx, "b", "d3", ttl); r != nil {
		r(true)
		t.Fatal("a released lease freed before it lapsed")
	}
	time.Sleep(ttl + 100*time.Millisecond)
	r, _, err := s.HoldBatch(ctx, "b", "d3", ttl)
	if err != nil || r == nil {
		t.Fatalf("a lapsed lease still holds: %v", err)
	}
	r(true)
}

func batchFiles(t *testing.T, s batchStore) {
	ctx := context.Background()
	now := time.Now().Add(-time.Minute)
	in := &state.File{ID: "f1", Tenant: "acme", Filename: "in.jsonl", Purpose: "batch", Bytes: 100,
		Created: now.Add(1500 * time.Microsecond), Expires: now.Add(time.Hour)}
	for _, f := range []*state.File{in,
		{ID: "f2", Tenant: "acme", Filename: "b.jsonl", Purpose: "batch_output", Bytes: 20, Created: now.Add(time.Second)},
		{ID: "f3", Tenant: "acme", Filename: "c.jsonl", Purpose: "batch", Bytes: 3, Created: now.Add(2 * time.Second)},
		{ID: "g1", Tenant: "other", Filename: "d.jsonl", Purpose: "batch", Bytes: 7, Created: now},
	} {
		if err := s.SaveFile(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	f, err := s.GetFile(ctx, "f1")
	if err != nil || f.ID != "f1" || f.Tenant != "acme" || f.Filename != "in.jsonl" || f.Purpose != "batch" || f.Bytes != 100 ||
		!f.Created.Equal(ms(in.Created)) || !f.Expires.Equal(ms(in.Expires)) {
		t.Fatalf("GetFile %+v %v", f, err)
	}
	if f, _ := s.GetFile(ctx, "f2"); !f.Expires.IsZero() {
		t.Fatalf("a file that does not expire: %+v", f)
	}
	if _, err := s.GetFile(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("GetFile of none: %v", err)
	}
	if n, b, err := s.FileUsage(ctx, "acme"); err != nil || n != 3 || b != 123 {
		t.Fatalf("acme's usage %d %d %v", n, b, err)
	}
	if got := collect(t, s.TenantFiles(ctx, "acme", "", false)); !slices.Equal(got, []string{"f3", "f2", "f1"}) {
		t.Fatalf("newest first %v", got)
	}
	if got := collect(t, s.TenantFiles(ctx, "acme", "", true)); !slices.Equal(got, []string{"f1", "f2", "f3"}) {
		t.Fatalf("oldest first %v", got)
	}
	if got := collect(t, s.TenantFiles(ctx, "acme", "f2", true)); !slices.Equal(got, []string{"f3"}) {
		t.Fatalf("after f2, oldest first %v", got)
	}
	if got := collect(t, s.TenantFiles(ctx, "acme", "f2", false)); !slices.Equal(got, []string{"f1"}) {
		t.Fatalf("after f2, newest first %v", got)
	}
	if got := collect(t, s.TenantFiles(ctx, "acme", "g1", false)); len(got) != 0 {
		t.Fatalf("after another tenant's file %v", got)
	}
	// Saving an id again replaces its size.
	in.Bytes = 50
	s.SaveFile(ctx, in)
	if n, b, _ := s.FileUsage(ctx, "acme"); n != 3 || b != 73 {
		t.Fatalf("usage after a file was saved again %d %d", n, b)
	}
	if err := s.DeleteFile(ctx, &state.File{ID: "f2", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetFile(ctx, "f2"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a deleted file: %v", err)
	}
	if n, b, _ := s.FileUsage(ctx, "acme"); n != 2 || b != 53 {
		t.Fatalf("usage after a delete %d %d", n, b)
	}
	if got := collect(t, s.TenantFiles(ctx, "acme", "", false)); !slices.Equal(got, []string{"f3", "f1"}) {
		t.Fatalf("after a delete %v", got)
	}
	if n, b, _ := s.FileUsage(ctx, "other"); n != 1 || b != 7 {
		t.Fatalf("other's usage %d %d", n, b)
	}
}

// A file past its expiry is gone from reads, counted until the sweep deletes it, and
// listed for the sweep (its id and tenant), soonest first, up to the limit.
func fileExpiry(t *testing.T, s batchStore) {
	ctx := context.Background()
	now := time.Now()
	tenant := "acme-" + state.NewID("") // ExpiredFiles is store-wide: these are this test's
	for i, f := range []*state.File{
		{ID: "e2-" + tenant, Tenant: tenant, Bytes: 10, Created: now, Expires: now.Add(400 * time.Millisecond)},
		{ID: "e1-" + tenant, Tenant: tenant, Bytes: 5, Created: now, Expires: now.Add(300 * time.Millisecond)},
		{ID: "keep-" + tenant, Tenant: tenant, Bytes: 1, Created: now, Expires: now.Add(time.Hour)},
	} {
		if err := s.SaveFile(ctx, f); err != nil {
			t.Fatal(i, err)
		}
	}
	mine := func(limit int) []string {
		fs, err := s.ExpiredFiles(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fs {
			if f.Tenant == tenant {
				out = append(out, f.ID)
			}
		}
		return out
	}
	if got := mine(100); len(got) != 0 {
		t.Fatalf("expired before their time: %v", got)
	}
	time.Sleep(600 * time.Millisecond)
	if _, err := s.GetFile(ctx, "e1-"+tenant); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("an expired file: %v", err)
	}
	if _, err := s.GetFile(ctx, "keep-"+tenant); err != nil {
		t.Fatalf("a live file: %v", err)
	}
	if n, b, _ := s.FileUsage(ctx, tenant); n != 3 || b != 16 {
		t.Fatalf("usage before the sweep %d %d", n, b)
	}
	if got := mine(100); !slices.Equal(got, []string{"e1-" + tenant, "e2-" + tenant}) {
		t.Fatalf("expired %v", got)
	}
	if got, _ := s.ExpiredFiles(ctx, 1); len(got) != 1 {
		t.Fatalf("limit 1 gave %d", len(got))
	}
	s.DeleteFile(ctx, &state.File{ID: "e1-" + tenant, Tenant: tenant})
	if got := mine(100); !slices.Equal(got, []string{"e2-" + tenant}) {
		t.Fatalf("after a delete %v", got)
	}
	if n, b, _ := s.FileUsage(ctx, tenant); n != 2 || b != 11 {
		t.Fatalf("usage after the sweep %d %d", n, b)
	}
}

func tenantLeases(t *testing.T, s batchStore) {
	ctx := context.Background()
	take := func(tenant, id string, limit int, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.AcquireLease(ctx, state.LeaseBatches, tenant, id, limit, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	held := func(tenant string) int {
		n, err := s.LeasesHeld(ctx, state.LeaseBatches, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if !take("acme", "a", 2, time.Hour) || !take("acme", "b", 2, time.Hour) {
		t.Fatal("the first two leases were refused")
	}
	if take("acme", "c", 2, time.Hour) {
		t.Fatal("a third lease was taken under a limit of 2")
	}
	if !take("acme", "a", 2, time.Hour) {
		t.Fatal("a held lease was not renewed")
	}
	if !take("other", "c", 2, time.Hour) {
		t.Fatal("another tenant's limit is apart")
	}
	if ok, _ := s.AcquireLease(ctx, state.LeaseJobs, "acme", "c", 2, time.Hour); !ok {
		t.Fatal("another kind's limit is apart")
	}
	if n := held("acme"); n != 2 {
		t.Fatalf("%d held", n)
	}
	if err := s.ReleaseLease(ctx, state.LeaseBatches, "acme", "a"); err != nil {
		t.Fatal(err)
	}
	s.ReleaseLease(ctx, state.LeaseBatches, "acme", "never") // not held: no error
	if !take("acme", "c", 2, time.Hour) {
		t.Fatal("a released slot was not free")
	}
	// No limit: taken, nothing recorded.
	if !take("free", "x", 0, time.Hour) || held("free") != 0 {
		t.Fatal("a lease without a limit")
	}
	// A lease that is not renewed lapses and frees its slot.
	if !take("short", "a", 1, 200*time.Millisecond) || take("short", "b", 1, time.Hour) {
		t.Fatal("short leases")
	}
	time.Sleep(300 * time.Millisecond)
	if held("short") != 0 {
		t.Fatal("a lapsed lease is counted")
	}
	if !take("short", "b", 1, time.Hour) {
		t.Fatal("a lapsed lease still holds its slot")
	}
}

func chargeRecord(t *testing.T, s batchStore) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	charge := func(record string, bytes int64, expires time.Time, limit int64, force bool) (bool, state.Storage) {
		t.Helper()
		ok, st, err := s.ChargeRecord(ctx, "acme", record, bytes, expires, limit, force)
		if err != nil {
			t.Fatal(err)
		}
		return ok, st
	}
	if ok, st := charge("r1", 600, exp, 1000, false); !ok || st.Used != 600 || st.Limit != 1000 || !st.FirstExpiry.Equal(ms(exp)) {
		t.Fatalf("r1: %v %+v", ok, st)
	}
	if ok, st := charge("r2", 500, exp.Add(-time.Minute), 1000, false); ok || st.Used != 600 || !st.FirstExpiry.Equal(ms(exp)) {
		t.Fatalf("r2 over the limit: %v %+v", ok, st)
	}
	if ok, st := charge("r2", 500, exp.Add(-time.Minute), 1000, true); !ok || st.Used != 1100 || !st.FirstExpiry.Equal(ms(exp.Add(-time.Minute))) {
		t.Fatalf("r2 forced: %v %+v", ok, st)
	}
	if ok, st := charge("r3", 1, exp, 1000, false); ok || st.Used != 1100 {
		t.Fatalf("a record past the limit: %v %+v", ok, st)
	}
	if ok, st := charge("r1", 100, exp, 1000, false); !ok || st.Used != 600 {
		t.Fatalf("a shrink over the limit: %v %+v", ok, st)
	}
	if ok, st := charge("r1", 400, exp, 1000, false); !ok || st.Used != 900 {
		t.Fatalf("a growth that fits: %v %+v", ok, st)
	}
	if ok, st := charge("r1", 400, exp, 1000, false); !ok || st.Used != 900 {
		t.Fatalf("the same size again: %v %+v", ok, st)
	}
	// Moving the earliest record's expiry moves the first expiry.
	if ok, st := charge("r2", 500, exp.Add(time.Minute), 1000, false); !ok || st.Used != 900 || !st.FirstExpiry.Equal(ms(exp)) {
		t.Fatalf("r2 moved: %v %+v", ok, st)
	}
	// No limit: counted all the same.
	if ok, st := charge("r4", 5000, exp, 0, false); !ok || st.Used != 5900 || st.Limit != 0 {
		t.Fatalf("no limit: %v %+v", ok, st)
	}
	if ok, st, _ := s.ChargeRecord(ctx, "other", "r1", 10, exp, 5, false); ok || st.Used != 0 {
		t.Fatalf("another tenant's ledger: %v %+v", ok, st)
	}
	// Racing charges against one limit: only what fits is charged.
	var wg sync.WaitGroup
	var took atomic.Int32
	for i := range 10 {
		wg.Go(func() {
			if ok, _, err := s.ChargeRecord(ctx, "race", "r"+string(rune('a'+i)), 100, exp, 450, false); err == nil && ok {
				took.Add(1)
			}
		})
	}
	wg.Wait()
	if took.Load() != 4 {
		t.Fatalf("%d of 10 charges of 100 fit under 450", took.Load())
	}
}

// A record past its expiry is given back by the tenant's next charge.
func chargeRecordExpiry(t *testing.T, s batchStore) {
	ctx := context.Background()
	now := time.Now()
	if ok, _, _ := s.ChargeRecord(ctx, "acme", "short", 800, now.Add(300*time.Millisecond), 1000, false); !ok {
		t.Fatal("refused")
	}
	if ok, st, _ := s.ChargeRecord(ctx, "acme", "long", 500, now.Add(time.Hour), 1000, false); ok || !st.FirstExpiry.Equal(ms(now.Add(300*time.Millisecond))) {
		t.Fatalf("a charge over the limit: %v %+v", ok, st)
	}
	time.Sleep(500 * time.Millisecond)
	ok, st, err := s.ChargeRecord(ctx, "acme", "long", 500, now.Add(time.Hour), 1000, false)
	if err != nil || !ok || st.Used != 500 || !st.FirstExpiry.Equal(ms(now.Add(time.Hour))) {
		t.Fatalf("after the first record expired: %v %+v %v", ok, st, err)
	}
}

// The jobs a batch submits: a job's id is taken once.
func jobsRecorded(t *testing.T, s batchStore) {
	ctx := context.Background()
	j := &state.Job{ID: "batch_b-0", Kind: "chat", Tenant: "acme", Batch: "b", Model: "m1", Request: json.RawMessage(`{"model":"m1"}`)}
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateJob(ctx, &state.Job{ID: "batch_b-0", Kind: "chat", Model: "m2", Request: json.RawMessage(`{}`)}); !errors.Is(err, state.ErrExists) {
		t.Fatalf("a job created twice: %v", err)
	}
	if st, err := s.JobStatus(ctx, "batch_b-0"); err != nil || st != state.Queued {
		t.Fatalf("JobStatus %q %v", st, err)
	}
	got, err := s.GetJob(ctx, "batch_b-0")
	if err != nil || got.Batch != "b" || got.Tenant != "acme" || got.Model != "m1" || string(got.Request) != `{"model":"m1"}` {
		t.Fatalf("GetJob %+v %v", got, err)
	}
	if _, err := s.GetJob(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("GetJob of none: %v", err)
	}
	if s.RecordRetention() <= 0 {
		t.Fatal("no retention")
	}
}
