// Package redistest gives unit tests the real store without a Redis server: a
// state.Store, built as the fleet builds it, over an in-process miniredis.
package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// Store returns a real state.Store over a miniredis of this test's own, with its
// scripts loaded and a retention of an hour. Both are closed when the test ends.
func Store(t testing.TB) *state.Store {
	s, _ := New(t)
	return s
}

// New is Store, with the miniredis under it, for a test that reaches past the store
// to break what it stored.
//
// miniredis lets keys expire only when told that time has passed, so a clock tells
// it every few milliseconds: leases and other TTLs lapse on time, as on Redis.
func New(t testing.TB) (*state.Store, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	rdb, err := state.NewClient("redis://" + mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rdb.Close()
		close(stop)
		<-done
	})
	s := state.New(rdb, state.NamespacePrefix("", ""), time.Hour)
	if err := s.LoadScripts(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, mr
}
