package batch

import (
	"errors"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A tenant's unfinished batches are capped: past the cap Create is refused as
// Limited (and nothing is created), another tenant is not; a batch that ends frees
// its slot. A refused input frees its slot at once.
func TestBatchesCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.s.Limits = config.NewTenantLimits(config.Limits{Batches: 1}, nil)
	if _, err := h.s.Create(t.Context(), tenant, &CreateParams{Queries: []string{""}, Model: "m1"}); !isKind(err, Invalid) {
		t.Fatalf("an invalid batch: %v", err)
	}
	id := h.create(2, nil)
	_, err := h.s.Create(t.Context(), tenant, &CreateParams{Queries: []string{"q"}, Model: "m1"})
	if e, ok := errors.AsType[*Error](err); !ok || e.Kind != Limited || e.Limit != "batches" || e.RetryAfter <= 0 {
		t.Fatalf("a second batch: %v", err)
	}
	if _, err := h.s.Create(t.Context(), "other", &CreateParams{Queries: []string{"q"}, Model: "m1"}); err != nil {
		t.Errorf("another tenant's batch: %v", err)
	}
	if _, err := h.s.Cancel(t.Context(), tenant, id); err != nil {
		t.Fatal(err)
	}
	h.drive(id)
	if b := h.record(id); b.Status != state.BatchCancelled {
		t.Fatalf("status %s", b.Status)
	}
	if n, _ := h.store.Leases.LeasesHeld(t.Context(), state.LeaseBatches, tenant); n != 0 {
		t.Errorf("%d batch slots held after the batch ended", n)
	}
	if v, err := h.s.Create(t.Context(), tenant, &CreateParams{Queries: []string{"q"}, Model: "m1"}); err != nil || !strings.HasPrefix(v.ID, "batch_") {
		t.Errorf("a batch after the first ended: %v", err)
	}
}

// The simple form read as a stream gives the batch the same input file as the
// parsed form, whether the model comes before the questions (streamed) or after them
// (kept until it is read); a non-string question and a body that is not an object
// are refused by name.
func TestCreateFromStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.s.Models = []string{"m1", "m2"}
	for _, body := range []string{
		`{"model":"m2","metadata":{"k":"v"},"queries":["one","two","three"]}`,
		`{"queries":["one","two","three"],"metadata":{"k":"v"},"model":"m2"}`,
	} {
		v, err := h.s.CreateFrom(t.Context(), tenant, strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		b := h.record(v.ID)
		if b.Total != 3 || b.Model != "m2" || b.Metadata["k"] != "v" {
			t.Errorf("%s: %+v", body, b)
		}
		f, err := h.store.Files.GetFile(t.Context(), b.InputFileID)
		if err != nil || f.Expires.Before(b.Expires) {
			t.Errorf("input file %+v %v", f, err)
		}
		rc, err := h.s.OpenFile(t.Context(), b.InputFileID)
		if err != nil {
			t.Fatal(err)
		}
		check, err := validate(rc, h.s.Models, nil)
		rc.Close()
		if err != nil || check.Requests != 3 || check.Invalid != 0 || check.CustomIDs[2] != "q-3" || int64(0) == f.Bytes {
			t.Errorf("stored input: %+v %v", check, err)
		}
	}
	for body, want := range map[string]string{
		`{"model":"m1","queries":["one",2]}`: "queries[1]",
		`["model"]`:                          "JSON object",
		`{"model":"m1","queries":["one"`:     "ends before",
		`{"model":"m1","queries":["", "x"]}`: "queries[0] is empty",
	} {
		_, err := h.s.CreateFrom(t.Context(), tenant, strings.NewReader(body))
		if e, ok := errors.AsType[*Error](err); !ok || e.Kind != Invalid || !strings.Contains(e.Message+e.Param+summary(e), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// summary is the line errors of a refused input.
func summary(e *Error) string {
	if e.Input == nil {
		return ""
	}
	return e.Input.AsInputError("queries").Error.Message
}
