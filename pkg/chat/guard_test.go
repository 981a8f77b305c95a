package chat_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// lostTransport takes requests and never answers them: a callback lost (or a panic
// on the transport's goroutine, which Send contains).
type lostTransport struct{}

func (lostTransport) RoundTrip(*http.Request) (*http.Response, error)  { select {} }
func (lostTransport) Start(*http.Request, func(*http.Response, error)) {}

// A deferred step whose model call never answers is not held for ever: past the
// model's timeout and a lease's length its delivery is finished with an error, so
// the consumer retries it, and the hop's lease is no longer kept.
func TestDeferredStepWhoseAnswerNeverComesIsRetried(t *testing.T) {
	t.Parallel()
	var working map[string]chat.Model
	h := newHarness(t, []func(http.ResponseWriter){text("Hello.")}, func(w *chat.Worker, _ *harness) {
		w.ModelTimeout = 300 * time.Millisecond
		working = w.Models
		w.Models = map[string]chat.Model{"m": {Provider: "sim", Client: upstream.New(wire.ChatModel, "sim", "https://model.invalid/v1", "", &http.Client{Transport: lostTransport{}}, upstream.Options{}), Upstream: "up"}}
	})
	h.submit("j1", "hi")
	outcome := make(chan error, 1)
	d := (&bus.Delivery[bus.ChatJob]{Msg: bus.ChatJob{JobID: "j1"}, Attempt: 1, MaxDeliver: 5}).WithOutcome(func(err error) { outcome <- err })
	start := time.Now()
	if err := h.w.HandleJob(context.Background(), d); err != nil {
		t.Fatalf("the handler of a deferred step returned %v", err)
	}
	var err error
	select {
	case err = <-outcome:
	case <-time.After(5 * time.Second):
		t.Fatal("the step was never finished")
	}
	if err == nil || !strings.Contains(err.Error(), "never came back") {
		t.Fatalf("finished with %v; want the guard's error", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("given up after %s, before the model's timeout", waited)
	}
	if d := bus.Decide(err, 1, 5); d.Action != bus.Nak {
		t.Fatalf("decision %+v; want a retry", d)
	}
	// The retry, on another worker whose model answers, finds the hop free.
	h.w.Models, h.w.ID = working, "w2"
	if err := h.job("j1", 2); err != nil {
		t.Fatalf("the retry: %v (the given-up step kept its hop?)", err)
	}
	if j := h.ended("j1"); !strings.Contains(string(j.Response), "Hello.") {
		t.Fatalf("response %s", j.Response)
	}
}
