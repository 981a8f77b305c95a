package state_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// A file's metadata is saved, read, listed for its tenant (in either order, from a
// cursor, not for another tenant) and deleted.
func TestFiles(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	base := time.Now().UTC().Truncate(time.Millisecond)
	var ids []string
	for i := range 3 {
		f := &state.File{ID: state.NewID("file-"), Tenant: "acme", Filename: "in.jsonl", Purpose: "batch", Bytes: int64(10 + i), Created: base.Add(time.Duration(i) * time.Second)}
		if err := s.Files.SaveFile(ctx, f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	got, err := s.Files.GetFile(ctx, ids[1])
	if err != nil || got.Tenant != "acme" || got.Bytes != 11 || got.Purpose != "batch" || !got.Created.Equal(base.Add(time.Second)) {
		t.Fatalf("file %+v %v", got, err)
	}
	if asc := collect(t, s.Files.TenantFiles(ctx, "acme", "", true)); !slices.Equal(asc, ids) {
		t.Errorf("ascending %v", asc)
	}
	if desc := collect(t, s.Files.TenantFiles(ctx, "acme", ids[2], false)); !slices.Equal(desc, []string{ids[1], ids[0]}) {
		t.Errorf("descending after the newest %v", desc)
	}
	if other := collect(t, s.Files.TenantFiles(ctx, "other", "", false)); len(other) != 0 {
		t.Errorf("another tenant sees %v", other)
	}
	if err := s.Files.DeleteFile(ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Files.GetFile(ctx, ids[1]); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("deleted file: %v", err)
	}
	if left := collect(t, s.Files.TenantFiles(ctx, "acme", "", true)); !slices.Equal(left, []string{ids[0], ids[2]}) {
		t.Errorf("after delete %v", left)
	}
}
