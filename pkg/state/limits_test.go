package state_test

import (
	"errors"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// A tenant's semaphore admits up to its limit, counts a renewal once, frees a slot
// on release and on its lease's expiry, and is the tenant's own.
func TestLeases(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	take := func(tenant, id string, ttl time.Duration) bool {
		ok, err := s.Leases.AcquireLease(ctx, state.LeaseStreams, tenant, id, 2, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// Lease 2 lives long enough for the next takes to see it even on a loaded machine
	// (at 50 ms, under load 24, it had expired before the third take was refused).
	if !take("a", "1", time.Minute) || !take("a", "2", 2*time.Second) || !take("a", "1", time.Minute) {
		t.Fatal("the first two leases (and a renewal) were refused")
	}
	if take("a", "3", time.Minute) {
		t.Error("a third lease was taken over a limit of 2")
	}
	if !take("b", "3", time.Minute) {
		t.Error("tenant b was refused by a's leases")
	}
	for !take("a", "3", time.Minute) { // lease 2 expires on its own
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Leases.ReleaseLease(ctx, state.LeaseStreams, "a", "1"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Leases.LeasesHeld(ctx, state.LeaseStreams, "a"); err != nil || n != 1 {
		t.Errorf("held after release: %d %v", n, err)
	}
}

// A file's size counts in its tenant's usage until it is deleted; a file with an
// expiry is gone (metadata) at it and listed for the sweep.
func TestFileUsageAndExpiry(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	now := time.Now().UTC()
	keep := &state.File{ID: state.NewID("file-"), Tenant: "u", Filename: "a", Purpose: "batch", Bytes: 100, Created: now}
	brief := &state.File{ID: state.NewID("file-"), Tenant: "u", Filename: "b", Purpose: "batch", Bytes: 20, Created: now, Expires: now.Add(100 * time.Millisecond)}
	for _, f := range []*state.File{keep, brief} {
		if err := s.Files.SaveFile(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if n, b, err := s.Files.FileUsage(ctx, "u"); err != nil || n != 2 || b != 120 {
		t.Errorf("usage %d files %d bytes %v", n, b, err)
	}
	for {
		_, err := s.Files.GetFile(ctx, brief.ID)
		if errors.Is(err, state.ErrNotFound) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	expired, err := s.Files.ExpiredFiles(ctx, 10)
	if err != nil || len(expired) != 1 || expired[0].ID != brief.ID || expired[0].Tenant != "u" {
		t.Fatalf("expired %v %v", expired, err)
	}
	if err := s.Files.DeleteFile(ctx, expired[0]); err != nil {
		t.Fatal(err)
	}
	if n, b, _ := s.Files.FileUsage(ctx, "u"); n != 1 || b != 100 {
		t.Errorf("usage after the sweep: %d files %d bytes", n, b)
	}
	if left, _ := s.Files.ExpiredFiles(ctx, 10); len(left) != 0 {
		t.Errorf("still listed as expired: %v", left)
	}
}
