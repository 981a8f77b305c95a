package upstream_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/llmtest"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// pausingServer answers the recorded pause_turn answer, then its continuation, and
// counts the requests.
func pausingServer(t *testing.T) (string, *atomic.Int64) {
	answers := [][]byte{
		fixtures.Read("anthropic/pydantic-pause-turn.0.response.json"),
		fixtures.Read("anthropic/pydantic-pause-turn.1-continuation.response.json"),
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		i := int(n.Add(1) - 1)
		if i >= len(answers) {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"too many calls"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(answers[i])
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// A paused answer is resumed under Start too, the continuation started from the
// callback of the paused answer: the joined answer is Complete's, done called once.
func TestStartPauseTurnContinues(t *testing.T) {
	t.Parallel()
	req := body([]string{user(question)}, webSearchTool)
	url, _ := pausingServer(t)
	want, err := upstreamtest.Chat{Caller: upstream.New(wire.AnthropicModel, "claude", url, key, nil, upstream.Options{NativeSearch: true})}.Complete(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, requests := pausingServer(t)
	tr := &llmtest.StartTransport{}
	c := upstreamtest.Chat{Caller: upstream.New(wire.AnthropicModel, "claude", url, key, &http.Client{Transport: tr}, upstream.Options{NativeSearch: true})}
	calls := 0
	got := make(chan *llm.Completion, 2)
	c.Start(context.Background(), req, nil, func(comp *llm.Completion, err error) {
		if err != nil {
			t.Errorf("Start: %v", err)
		}
		calls++
		got <- comp
	})
	var comp *llm.Completion
	select {
	case comp = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("done was not called")
	}
	tr.Wait()
	if calls != 1 || tr.Starts() != 2 || requests.Load() != 2 {
		t.Fatalf("done called %d times after %d Starts, %d requests; want once after the paused answer and its continuation", calls, tr.Starts(), requests.Load())
	}
	if comp == nil || string(comp.Message) != string(want.Message) || comp.FinishReason != want.FinishReason || comp.Usage != want.Usage {
		t.Fatalf("Start gave %+v; Complete %+v", comp, want)
	}
	if _, n := nativeMessage(t, comp); n == nil || n.Requests != 15 {
		t.Errorf("joined native report %+v; want the 15 searches of both parts", n)
	}
}
