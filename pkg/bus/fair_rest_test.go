package bus

import (
	"testing"
	"time"
)

// A lane's publish is told as the server routes it, which can be before the stream has
// stored it. An ask that finds the lane empty just then must not rest it for dryFirst:
// the message would wait that long with a slot free (a sequential client's request
// every few dozen).
func TestFairEmptyAskJustAfterAPublishRestsBriefly(t *testing.T) {
	f := &fair[*ChatJob]{lanes: map[Lane]*lane{}, wake: make(chan struct{}, 1)}
	l := Lane{Band: BandSync, Tenant: "ivy"}
	f.seen(l)
	ln := f.lanes[l]
	now := ln.expect.Add(time.Millisecond)
	f.emptied(ln, now)
	if ln.dry != expectRetry {
		t.Fatalf("an empty ask 1ms after a publish was told rests %v, want %v", ln.dry, expectRetry)
	}
	f.emptied(ln, now.Add(2*time.Millisecond))
	if ln.dry != 2*expectRetry {
		t.Fatalf("the next empty ask rests %v, want %v", ln.dry, 2*expectRetry)
	}
	// Past expectLag the message was taken elsewhere: the lane rests as an empty one.
	f.emptied(ln, ln.expect.Add(expectLag+time.Millisecond))
	if ln.dry != dryFirst {
		t.Fatalf("an empty ask past expectLag rests %v, want %v", ln.dry, dryFirst)
	}
	// A lane emptied with nothing told rests dryFirst at once.
	other := &lane{Lane: Lane{Band: BandAsync, Tenant: "ivy"}}
	f.emptied(other, now)
	if other.dry != dryFirst {
		t.Fatalf("an idle lane rests %v, want %v", other.dry, dryFirst)
	}
}
