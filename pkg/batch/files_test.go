package batch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// An uploaded input is stored while it is validated, listed once recorded, readable
// only by its tenant, and runs as a batch's input; an invalid upload leaves nothing
// stored. The tenant's batches list newest first, a page at a time.
func TestUploadListAndRunFromFile(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	in := line("a", "m1", "one") + "\n" + line("b", "m1", "two") + "\n"
	f, check, err := h.s.StoreUpload(ctx, tenant, "in.jsonl", strings.NewReader(in))
	if err != nil || check.Invalid != 0 || check.Requests != 2 || f.Bytes != int64(len(in)) || f.Purpose != PurposeBatch {
		t.Fatalf("StoreUpload %+v %+v %v", f, check, err)
	}
	if _, err := h.s.File(ctx, tenant, f.ID); err == nil {
		t.Fatal("a file not recorded yet is found")
	}
	if err := h.s.RecordUpload(ctx, f, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := h.s.File(ctx, tenant, f.ID); err != nil || got.Filename != "in.jsonl" || !got.Expires.Equal(f.Created.Add(DefaultFileExpiry).Truncate(time.Millisecond)) {
		t.Fatalf("File %+v %v", got, err)
	}
	if _, err := h.s.File(ctx, "other", f.ID); !isKind(err, NotFound) {
		t.Fatalf("another tenant's file: %v", err)
	}
	bad, check, err := h.s.StoreUpload(ctx, tenant, "bad.jsonl", strings.NewReader(line("a", "nope", "x")+"\n"))
	if err != nil || bad != nil || check.Invalid != 1 {
		t.Fatalf("an invalid upload %+v %+v %v", bad, check, err)
	}
	files, more, err := h.s.Files(ctx, tenant, PurposeBatch, "", false, 10)
	if err != nil || more || len(files) != 1 || files[0].ID != f.ID {
		t.Fatalf("Files %+v %v %v", files, more, err)
	}
	if files, _, _ := h.s.Files(ctx, tenant, "batch_output", "", false, 10); len(files) != 0 {
		t.Fatalf("files of another purpose %+v", files)
	}

	v, err := h.s.Create(ctx, tenant, &CreateParams{InputFileID: f.ID, Endpoint: "/v1/chat/completions", CompletionWindow: "24h"})
	if err != nil {
		t.Fatal(err)
	}
	if b := h.record(v.ID); b.Total != 2 || b.InputFileID != f.ID || b.Model != "m1" {
		t.Fatalf("a batch from a file %+v", b)
	}
	if _, err := h.s.Create(ctx, "other", &CreateParams{InputFileID: f.ID, Endpoint: "/v1/chat/completions", CompletionWindow: "24h"}); !isKind(err, NotFound) {
		t.Fatalf("a batch from another tenant's file: %v", err)
	}
	second := h.create(1, nil)
	list, more, err := h.s.List(ctx, tenant, "", 1)
	if err != nil || !more || len(list) != 1 || list[0].ID != second {
		t.Fatalf("the first page %+v %v %v", list, more, err)
	}
	list, more, err = h.s.List(ctx, tenant, second, 10)
	if err != nil || more || len(list) != 1 || list[0].ID != v.ID {
		t.Fatalf("the next page %+v %v %v", list, more, err)
	}
}

// A file past its expiry is deleted by the sweep: its bytes, its record and its
// place in the tenant's usage.
func TestSweepDeletesExpiredFiles(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f, _, err := h.s.StoreUpload(ctx, tenant, "in.jsonl", strings.NewReader(line("a", "m1", "one")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.RecordUpload(ctx, f, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := h.store.Files.FileUsage(ctx, tenant); n != 1 {
		t.Fatalf("%d files counted", n)
	}
	go h.s.Sweep(ctx, 50*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _, _ := h.store.Files.FileUsage(ctx, tenant)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired file was not swept")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := h.s.OpenFile(ctx, f.ID); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("the swept file's bytes: %v", err)
	}
	if files, _, _ := h.s.Files(ctx, tenant, "", "", false, 10); len(files) != 0 {
		t.Fatalf("swept files listed %+v", files)
	}
}

// A tenant's file quota refuses an upload past its count or its bytes, and stores
// nothing of it.
func TestFileQuota(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	in := line("a", "m1", "one") + "\n"
	h.s.Limits = config.NewTenantLimits(config.Limits{Files: 1, FileBytes: int64(len(in)) + 10}, nil)
	f, _, err := h.s.StoreUpload(ctx, tenant, "in.jsonl", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.RecordUpload(ctx, f, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.s.StoreUpload(ctx, tenant, "two.jsonl", strings.NewReader(in)); !isLimit(err, "files") {
		t.Fatalf("a file past the count: %v", err)
	}
	h.s.Limits = config.NewTenantLimits(config.Limits{Files: 10, FileBytes: int64(len(in)) + 10}, nil)
	if _, _, err := h.s.StoreUpload(ctx, tenant, "two.jsonl", strings.NewReader(in)); !isLimit(err, "file_bytes") {
		t.Fatalf("a file past the bytes: %v", err)
	}
	if n, b, _ := h.store.Files.FileUsage(ctx, tenant); n != 1 || b != int64(len(in)) {
		t.Fatalf("usage %d %d after refusals", n, b)
	}
}

// isLimit reports whether err is a refusal by the tenant's limit named limit.
func isLimit(err error, limit string) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Kind == Limited && e.Limit == limit
}

// A batch line whose job record does not fit in the tenant's storage quota is not
// run: its job is recorded without its request and failed with
// storage_quota_exceeded, and the batch's error file says so.
func TestLinePastStorageQuota(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	h.s.Limits = config.NewTenantLimits(config.Limits{StorageBytes: state.RecordAllowance + 500}, nil)
	id := h.create(3, nil)
	h.drive(id)
	var run []int
	for i := range 3 {
		job, err := h.store.Jobs.GetJob(ctx, jobID(id, i))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case job.Status == state.Queued:
			run = append(run, i)
		case job.Status != state.Failed || job.Error == nil || job.Error.Code != "storage_quota_exceeded" || string(job.Request) != "{}":
			t.Fatalf("line %d's job %+v", i, job)
		default:
			h.s.JobFinished(ctx, job) // as the job's ended event does
		}
	}
	if len(run) != 1 {
		t.Fatalf("lines %v run, want one", run)
	}
	h.end(id, run[0], "")
	h.drive(id)
	b := h.record(id)
	if b.Status != state.BatchCompleted || b.Completed != 1 || b.Failed != 2 {
		t.Fatalf("batch %+v", b)
	}
	errs := h.lines(b.ErrorFileID)
	if len(errs) != 2 || errs[0].Error.Code != "storage_quota_exceeded" {
		t.Fatalf("errors %+v", errs)
	}
	if st, _ := h.store.Ledger.StorageOf(ctx, tenant); st.Used <= state.RecordAllowance || st.Used > state.RecordAllowance+500 {
		t.Fatalf("charged %+v", st)
	}
}
