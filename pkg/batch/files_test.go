package batch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
	if n, _, _ := h.store.FileUsage(ctx, tenant); n != 1 {
		t.Fatalf("%d files counted", n)
	}
	go h.s.Sweep(ctx, 50*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _, _ := h.store.FileUsage(ctx, tenant)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired file was not swept")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := h.s.OpenFile(ctx, f.ID); !errors.Is(err, errNoFile) {
		t.Fatalf("the swept file's bytes: %v", err)
	}
	if files, _, _ := h.s.Files(ctx, tenant, "", "", false, 10); len(files) != 0 {
		t.Fatalf("swept files listed %+v", files)
	}
}
