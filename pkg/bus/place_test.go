package bus_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
)

// A running handler holds its delivery and its place in the worker's concurrency
// until it returns: its heartbeats keep it from redelivery past AckWait, and a
// message beyond the worker's concurrency waits for a free place. Each delivery frees
// its place once, whether its handler returned well, failed (retried) or panicked
// (retried).
func TestRunningHandlerHoldsItsPlace(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	gate := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]int{}
	var calls, inFlight atomic.Int64
	o := opts()
	o.Concurrency = 3
	o.Heartbeat = 150 * time.Millisecond
	o.InFlight = func(_ string, delta int) { inFlight.Add(int64(delta)) }
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		calls.Add(1)
		mu.Lock()
		seen[d.ID]++
		mu.Unlock()
		<-gate
		switch {
		case d.Msg.N == 0 && d.Attempt == 1:
			return errors.New("transient")
		case d.Msg.N == 1 && d.Attempt == 1:
			panic("boom")
		}
		return nil
	}, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		publish(t, b, ping{ID: "held" + strconv.Itoa(i), N: i})
	}
	eventually(t, "3 handlers running", func() bool { return calls.Load() == 3 })
	// ~3× AckWait: heartbeats keep the three; the fourth waits for a free place.
	time.Sleep(2 * time.Second)
	if c := calls.Load(); c != 3 {
		t.Fatalf("handler called %d times while 3 running handlers held every place, want 3 (a redelivery or a 4th start)", c)
	}
	if n := inFlight.Load(); n != 3 {
		t.Fatalf("in flight = %d, want 3", n)
	}
	close(gate)
	eventually(t, "stream empty", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
	eventually(t, "nothing in flight", func() bool { return inFlight.Load() == 0 })
	mu.Lock()
	for i := range 4 {
		id := "held" + strconv.Itoa(i)
		// The failure and the panic are retried; the fourth, which waited in the pull
		// buffer past AckWait, may come more than once.
		want := 1
		if i < 2 {
			want = 2
		}
		if seen[id] < want {
			t.Errorf("%s handled %d times, want at least %d", id, seen[id], want)
		}
	}
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := inFlight.Load(); n != 0 {
		t.Fatalf("in flight = %d after Drain, want 0 (a place freed twice or never)", n)
	}
}
