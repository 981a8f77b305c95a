package state

import (
	"testing"
	"time"
)

// A key's TTL is due at its first write, then once per refreshEvery; a forgotten key
// (its write failed) and a clock gone backwards make it due again.
func TestRefreshesSetATTLOncePerInterval(t *testing.T) {
	var r refreshes
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	if !r.due("a", t0) {
		t.Fatal("the first write does not set the TTL")
	}
	if r.due("a", t0.Add(refreshEvery-time.Second)) {
		t.Error("a write within the interval sets the TTL again")
	}
	if !r.due("b", t0) {
		t.Error("another key's first write does not set its TTL")
	}
	if !r.due("a", t0.Add(refreshEvery)) {
		t.Error("a write an interval later does not set the TTL")
	}
	r.forget("a")
	if !r.due("a", t0.Add(refreshEvery+time.Second)) {
		t.Error("a forgotten key's next write does not set the TTL")
	}
	if !r.due("a", t0) {
		t.Error("a clock gone backwards keeps the TTL from being set")
	}
	for i := range refreshesKept + 1 {
		r.due(string(rune('A'+i%26))+time.Duration(i).String(), t0)
	}
	if len(r.last) > refreshesKept {
		t.Errorf("%d keys remembered, want at most %d", len(r.last), refreshesKept)
	}
}
