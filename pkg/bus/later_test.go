package bus_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
)

// A deferred delivery (Delivery.Later) is held, with no goroutine of its own, until it
// is finished: its heartbeats keep it from redelivery past AckWait, it holds its place
// in the worker's concurrency, and finish's error decides its fate as a returned error
// would.
func TestLaterHoldsTheDeliveryUntilFinished(t *testing.T) {
	// Not parallel: it counts goroutines.
	b, _ := bustest.New(t)
	var mu sync.Mutex
	finishers := map[string]func(error){}
	var calls, inFlight atomic.Int64
	var auto atomic.Bool
	o := opts()
	o.Concurrency = 3
	o.Heartbeat = 150 * time.Millisecond
	o.InFlight = func(_ string, delta int) { inFlight.Add(int64(delta)) }
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		calls.Add(1)
		finish := d.Later()
		mu.Lock()
		finishers[d.ID+"#"+strconv.Itoa(d.Attempt)] = finish
		mu.Unlock()
		if auto.Load() {
			finish(nil)
		}
		return errors.New("ignored: the outcome is finish's")
	}, o)
	if err != nil {
		t.Fatal(err)
	}
	g0 := runtime.NumGoroutine()
	for i := range 4 {
		publish(t, b, ping{ID: "later" + strconv.Itoa(i), N: i})
	}
	held := func() int { mu.Lock(); defer mu.Unlock(); return len(finishers) }
	eventually(t, "3 deliveries deferred", func() bool { return held() == 3 })
	// ~3× AckWait: heartbeats keep the three; the fourth waits for a free place.
	time.Sleep(2 * time.Second)
	if c := calls.Load(); c != 3 {
		t.Fatalf("handler called %d times while 3 deferred deliveries held every place, want 3 (a redelivery or a 4th start)", c)
	}
	if n := inFlight.Load(); n != 3 {
		t.Fatalf("in flight = %d, want 3", n)
	}
	// Goroutines of their own (a heartbeat timer firing, the client's and the
	// server's loops) come and go: the fewest seen over half a second must be fewer
	// than one per deferred delivery (a busy machine once caught two passing by).
	least := runtime.NumGoroutine()
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		least = min(least, runtime.NumGoroutine())
	}
	if least >= g0+3 {
		t.Fatalf("at least %d goroutines with 3 deferred deliveries, had %d before: a deferred delivery must hold none", least, g0)
	}
	// One fails (retried like a returned error), the others end well. From now on
	// every delivery is finished at once: the fourth, and the redeliveries of it that
	// waited in the pull buffer past AckWait, must not hold places forever.
	auto.Store(true)
	mu.Lock()
	failed := ""
	for i := range 4 {
		id := "later" + strconv.Itoa(i)
		f := finishers[id+"#1"]
		switch {
		case f == nil:
		case failed == "":
			failed = id
			f(errors.New("transient"))
		default:
			f(nil)
			f(errors.New("a second finish changes nothing"))
		}
	}
	mu.Unlock()
	eventually(t, "the failed one redelivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return finishers[failed+"#2"] != nil
	})
	eventually(t, "stream empty", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
	eventually(t, "nothing in flight", func() bool { return inFlight.Load() == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

// Drain waits for a deferred delivery until it is finished, and it is acknowledged.
func TestDrainWaitsForDeferred(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	finishes := make(chan func(error), 1)
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		finishes <- d.Later()
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	publish(t, b, ping{ID: "deferred", N: 1})
	finish := <-finishes
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drained <- w.Drain(ctx)
	}()
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) with a delivery still deferred", err)
	case <-time.After(500 * time.Millisecond):
	}
	finish(nil)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	eventually(t, "acked", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
}

// A handler that finishes its delivery before returning ends it once, with finish's
// outcome; one that panics after deferring still ends it (retried).
func TestLaterFinishedEarlyOrPanicking(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	var calls atomic.Int64
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		n := calls.Add(1)
		finish := d.Later()
		if n == 1 {
			panic("after deferring")
		}
		finish(nil)
		return errors.New("ignored")
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	publish(t, b, ping{ID: "early", N: 1})
	eventually(t, "acked", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
	time.Sleep(time.Second) // past AckWait: nothing comes back
	if c := calls.Load(); c != 2 {
		t.Fatalf("handler called %d times, want 2 (the panic retried once)", c)
	}
}
