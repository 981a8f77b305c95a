// Package llmtest has what the tests of the model callers (pkg/llm, upstream,
// nativechat) share: an async transport whose answers really come after Start has
// returned, so a test exercises a caller's Start path as h2async drives it.
package llmtest

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Starter is a Caller spoken to in Chat that can make its call without a goroutine
// waiting on the provider (upstreamtest.Chat drives an upstream.Caller so).
type Starter interface {
	llm.Caller
	// Start makes the call Complete makes and calls done exactly once with its outcome,
	// either before Start returns or later on another goroutine. onDelta (as in Complete)
	// is called in order, on the goroutine reading the answer, before done.
	Start(ctx context.Context, body []byte, onDelta func(llm.Delta), done func(*llm.Completion, error))
}

// StartTransport is an llm.AsyncTransport over Base. It answers every Start on a
// goroutine of its own that sends the request only once Start has returned, so done
// never runs inside Start. It counts its Starts and its plain round trips.
type StartTransport struct {
	// Base sends the requests (nil: http.DefaultTransport).
	Base       http.RoundTripper
	starts     atomic.Int64
	roundTrips atomic.Int64
	running    sync.WaitGroup // the goroutines of Starts whose done has not returned
}

var _ llm.AsyncTransport = (*StartTransport)(nil)

func (t *StartTransport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

// RoundTrip sends r at once, counted as a plain round trip.
func (t *StartTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.roundTrips.Add(1)
	return t.base().RoundTrip(r)
}

// Start sends r once Start has returned, and calls done with the answer.
func (t *StartTransport) Start(r *http.Request, done func(*http.Response, error)) {
	t.starts.Add(1)
	t.running.Add(1)
	returned := make(chan struct{})
	defer close(returned)
	go func() {
		defer t.running.Done()
		<-returned
		done(t.base().RoundTrip(r))
	}()
}

// Starts is how many requests went through Start.
func (t *StartTransport) Starts() int64 { return t.starts.Load() }

// RoundTrips is how many requests went through RoundTrip.
func (t *StartTransport) RoundTrips() int64 { return t.roundTrips.Load() }

// Wait waits until the done of every Start so far has returned.
func (t *StartTransport) Wait() { t.running.Wait() }

// Outcome is what one Start's done was called with, and how many times.
type Outcome struct {
	Comp  *llm.Completion
	Err   error
	Calls int
}

// StartWait calls c's Start and returns its outcome once done has run and every
// callback of tr has returned, so that a second call of done would be counted.
func StartWait(t testing.TB, tr *StartTransport, c llm.Caller, ctx context.Context, body []byte, onDelta func(llm.Delta)) Outcome {
	t.Helper()
	s, ok := c.(Starter)
	if !ok {
		t.Fatalf("%T is not a Starter", c)
	}
	var mu sync.Mutex
	var o Outcome
	first := make(chan struct{})
	s.Start(ctx, body, onDelta, func(comp *llm.Completion, err error) {
		mu.Lock()
		defer mu.Unlock()
		if o.Calls++; o.Calls == 1 {
			o.Comp, o.Err = comp, err
			close(first)
		}
	})
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("done was not called")
	}
	tr.Wait()
	mu.Lock()
	defer mu.Unlock()
	return o
}
