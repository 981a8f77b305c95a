package ingress

import (
	"errors"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// waiters hands the events of every job to the requests waiting for them. A Server
// holds one subscription, on the events of all jobs (bus.SubjectEventsAll), made by
// its first waiter; each waiter is registered under its job before the job is
// published, so its terminal event cannot be missed, and removed when its request is
// done. One subscription rather than one a job: each costs the NATS server an insert
// into and a removal from its subject index and match cache.
//
// A second subscription takes the ended jobs the workers hand this ingress
// (bus.SubjectEnded): a job created with this ingress's token (state.Job.Ingress) is
// sent, as its ending left it, to this ingress before its terminal event, so its
// waiter answers without reading it from Redis. The connection's reader queues a
// handed job on that subscription before it reads the terminal event that follows
// it, and the events subscription takes the queued ones (takeEnded) before it
// delivers an event: a terminal event finds its job handed over already, if it was.
type waiters struct {
	mu    sync.Mutex
	sub   *nats.Subscription // nil until the first waiter
	byJob map[string][]*waiter
	// token names this ingress to the workers (state.Job.Ingress; "" when ended is
	// nil: jobs then name no ingress); ended receives the jobs they hand it.
	token string
	ended *nats.Subscription
}

// The bounds of the ended jobs queued for the events subscription: each is taken
// at the next event, so few wait; beyond these the connection drops them, and their
// waiters read Redis.
const (
	endedPendingMsgs  = 4096
	endedPendingBytes = 64 << 20
)

// add registers wt for jobID's events, subscribing on b first if need be. The
// returned func removes it; ingress is the token that names this ingress to the
// workers while this registration lasts (state.Job.Ingress; "" without the
// subscription of handed jobs).
func (ws *waiters) add(b *bus.Bus, jobID string, wt *waiter) (remove func(), ingress string, err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.sub == nil || !ws.sub.IsValid() {
		ws.subscribeEnded(b)
		// deliver takes mu too: it runs on the subscription's goroutine, never before
		// Subscribe returns.
		sub, err := b.Subscribe(bus.SubjectEventsAll, func(m *nats.Msg) { ws.deliver(b, m) })
		if err != nil {
			return nil, "", err
		}
		ws.sub, ws.byJob = sub, map[string][]*waiter{}
	}
	ws.byJob[jobID] = append(ws.byJob[jobID], wt)
	return func() { ws.remove(jobID, wt) }, ws.token, nil
}

// subscribeEnded subscribes to the ended jobs handed to this ingress, under a new
// random token; without it (a failed subscribe) jobs name no ingress.
func (ws *waiters) subscribeEnded(b *bus.Bus) {
	if ws.ended != nil {
		ws.ended.Unsubscribe()
	}
	ws.token, ws.ended = "", nil
	token := state.NewID("")
	sub, err := b.SubscribeSync(bus.SubjectEndedTo(token))
	if err != nil {
		return
	}
	if err := sub.SetPendingLimits(endedPendingMsgs, endedPendingBytes); err != nil {
		sub.Unsubscribe()
		return
	}
	ws.token, ws.ended = token, sub
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
	ws.takeEnded(b)
	for _, wt := range ws.byJob[job] {
		select {
		case wt.ch <- m:
		default:
		}
	}
}

// takeEnded gives the ended jobs handed to this ingress so far to their waiters; one
// nobody waits for (its client left) is dropped. Called with mu held.
func (ws *waiters) takeEnded(b *bus.Bus) {
	if ws.ended == nil {
		return
	}
	for {
		if n, _, err := ws.ended.Pending(); err != nil || n == 0 {
			return
		}
		m, err := ws.ended.NextMsg(0)
		if errors.Is(err, nats.ErrSlowConsumer) {
			continue // reported once after the connection dropped some: the rest are there
		}
		if err != nil {
			return
		}
		for _, wt := range ws.byJob[b.EndedJob(m.Subject)] {
			wt.ended.Store(m)
		}
	}
}
