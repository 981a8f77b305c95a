package ingress

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
)

// Many requests wait at once, all through one subscription of events (and one of the
// ended jobs handed to this ingress): each waiter gets its own
// job's events, every one and no other job's (two waiters of one job both get them,
// a job nothing is published for gets nothing), and once its request is done a
// waiter leaves nothing registered.
func TestWaitersGetTheirOwnJobsEvents(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	s := New(Options{Bus: b})
	const jobs = 200
	progress := []bus.EventType{bus.EventQueued, bus.EventModelCall, bus.EventSearchRequested}
	subs := b.RawConn().NumSubscriptions()

	all := make([]*waiter, jobs+2) // one per job, a second of job 0, one of a silent job
	var wg sync.WaitGroup
	for i := range all {
		wg.Go(func() {
			id := fmt.Sprintf("job_%d", i)
			switch i {
			case jobs:
				id = "job_0"
			case jobs + 1:
				id = "job_silent"
			}
			wt, err := s.watch(id)
			if err != nil {
				t.Error(err)
				return
			}
			all[i] = wt
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n := b.RawConn().NumSubscriptions() - subs; n != 1 {
		t.Errorf("%d waiters hold %d subscriptions, want 1 (the events)", len(all), n)
	}
	if n := s.events.registered(); n != jobs+1 {
		t.Errorf("%d jobs registered, want %d", n, jobs+1)
	}

	for g := range 4 { // publishers of a quarter of the jobs each
		wg.Go(func() {
			for i := g; i < jobs; i += 4 {
				id := fmt.Sprintf("job_%d", i)
				for _, typ := range append(progress, bus.EventCompleted) {
					if err := b.EmitEvent(bus.Event{JobID: id, Type: typ}); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	for i, wt := range all[:jobs+1] {
		wg.Go(func() {
			want := fmt.Sprintf("job_%d", i%jobs)
			for n := 0; ; n++ {
				select {
				case m := <-wt.ch:
					ev, _, err := bus.Decode[bus.Event](m.Data)
					if err != nil || ev.JobID != want {
						t.Errorf("the waiter of %s got %s (%v)", want, m.Subject, err)
						return
					}
					if ev.Type.Terminal() {
						if n != len(progress) {
							t.Errorf("the waiter of %s got %d events before the end, want %d", want, n, len(progress))
						}
						return
					}
				case <-time.After(10 * time.Second):
					t.Errorf("the waiter of %s got %d events, and no end", want, n)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case m := <-all[jobs+1].ch:
		t.Errorf("the waiter of a silent job got %s", m.Subject)
	case <-time.After(100 * time.Millisecond):
	}

	for _, wt := range all {
		wt.stop()
	}
	if n := s.events.registered(); n != 0 {
		t.Errorf("%d jobs still registered after every waiter stopped", n)
	}
}

// registered is how many jobs have waiters.
func (ws *waiters) registered() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.byJob)
}
