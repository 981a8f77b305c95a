package ingress

import (
	"slices"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// waiters hands the events of every job to the requests waiting for them. A Server
// holds one subscription, on the events of all jobs (bus.SubjectEventsAll), made by
// its first waiter; each waiter is registered under its job before the job is
// published, so its terminal event cannot be missed, and removed when its request is
// done. One subscription rather than one a job: each costs the NATS server an insert
// into and a removal from its subject index and match cache. A waiter reads its
// ended job from Redis.
type waiters struct {
	mu    sync.Mutex
	sub   *nats.Subscription // nil until the first waiter
	byJob map[string][]*waiter
}

// add registers wt for jobID's events, subscribing on b first if need be. The
// returned func removes it.
func (ws *waiters) add(b *bus.Bus, jobID string, wt *waiter) (remove func(), err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.sub == nil || !ws.sub.IsValid() {
		// deliver takes mu too: it runs on the subscription's goroutine, never before
		// Subscribe returns.
		sub, err := b.Subscribe(bus.SubjectEventsAll, func(m *nats.Msg) { ws.deliver(b, m) })
		if err != nil {
			return nil, err
		}
		ws.sub, ws.byJob = sub, map[string][]*waiter{}
	}
	ws.byJob[jobID] = append(ws.byJob[jobID], wt)
	return func() { ws.remove(jobID, wt) }, nil
}

func (ws *waiters) remove(jobID string, wt *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	left := slices.DeleteFunc(ws.byJob[jobID], func(w *waiter) bool { return w == wt })
	if len(left) == 0 {
		delete(ws.byJob, jobID)
		return
	}
	ws.byJob[jobID] = left
}

// deliver passes an event to its job's waiters. A waiter whose channel is full misses
// it, as it would a message of its own full subscription: the wait's Redis poll still
// sees the job end.
func (ws *waiters) deliver(b *bus.Bus, m *nats.Msg) {
	job := b.EventJob(m.Subject)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, wt := range ws.byJob[job] {
		select {
		case wt.ch <- m:
		default:
		}
	}
}
