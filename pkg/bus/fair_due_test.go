package bus_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
)

// A message its handler defers (a provider agent's run polled every 20 ms) is taken
// again when its delay is over. No publish announces it, and its lane, found empty
// while the delay ran, rests at least 250 ms: without the lane's wake ten deliveries
// take 2.25 s or more.
func TestFairDeferredMessageIsTakenWhenDue(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	const deliveries, delay = 10, 20 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	done := make(chan struct{})
	h := func(_ context.Context, d *bus.Delivery[bus.ChatJob]) error {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if len(at) == deliveries {
			close(done)
		}
		if len(at) >= deliveries {
			return nil
		}
		return bus.Defer(delay, errors.New("the provider's run goes on"))
	}
	spec := bus.JobLanes(bus.Timing{AckWait: 30 * time.Second, MaxDeliver: -1, MaxAckPending: 1000}, 0)
	w, err := bus.ConsumeFair(context.Background(), b, spec, nil, h, bus.ConsumeOptions{Concurrency: 4, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	publishLane(t, b, bus.BandAsync, "acme", "", 1)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the deferred message was not delivered ten times")
	}
	mu.Lock()
	defer mu.Unlock()
	if took := at[len(at)-1].Sub(at[0]); took > 1500*time.Millisecond {
		t.Errorf("%d deliveries %s apart took %s: the lane waited out its rests, not the delay", deliveries, delay, took)
	}
}
