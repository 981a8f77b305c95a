package nativechat_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// startTransport is an llm.AsyncTransport over http.DefaultTransport that answers
// every Start on a goroutine of its own, once Start has returned (so the async path is
// the one exercised), and counts its Starts (pkg/llm's async_test.go has its twin).
type startTransport struct {
	starts  atomic.Int64
	running sync.WaitGroup
}

func (t *startTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return http.DefaultTransport.RoundTrip(r)
}

func (t *startTransport) Start(r *http.Request, done func(*http.Response, error)) {
	t.starts.Add(1)
	t.running.Add(1)
	returned := make(chan struct{})
	defer close(returned)
	go func() {
		defer t.running.Done()
		<-returned
		done(http.DefaultTransport.RoundTrip(r))
	}()
}

// startWait calls c's Start and returns what done got, and how many times, once done
// has run and every callback of tr has returned.
func startWait(t *testing.T, tr *startTransport, c llm.Starter, ctx context.Context, body []byte, onDelta func(llm.Delta)) (*llm.Completion, int, error) {
	t.Helper()
	var mu sync.Mutex
	var comp *llm.Completion
	var err error
	calls := 0
	first := make(chan struct{})
	c.Start(ctx, body, onDelta, func(cp *llm.Completion, e error) {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 1 {
			comp, err = cp, e
			close(first)
		}
	})
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("done was not called")
	}
	tr.running.Wait()
	mu.Lock()
	defer mu.Unlock()
	return comp, calls, err
}

// The capture transport GLM reads its search results through stays an
// llm.AsyncTransport over one, and only over one (Start on a base that has none
// would not exist).
func TestHTTPClientKeepsAsyncTransport(t *testing.T) {
	t.Parallel()
	if _, ok := nativechat.HTTPClient(&http.Client{Transport: &startTransport{}}).Transport.(llm.AsyncTransport); !ok {
		t.Error("over an AsyncTransport: not one")
	}
	if _, ok := nativechat.HTTPClient(nil).Transport.(llm.AsyncTransport); ok {
		t.Error("over http.DefaultTransport: claims to be an AsyncTransport")
	}
}

// Kimi's echo rounds and GLM's captured search results work under Start through an
// async transport: the same Completion as Complete through a plain client, whole and
// streamed (the same deltas, a prefix of the answer), every request started.
func TestStartKimiAndGLMMatchComplete(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(simulator.New(simulator.Options{}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		kind     nativechat.Kind
		question string
		requests int64 // a call's requests: Kimi's search round and its echo
	}{
		{nativechat.Kimi, "Search the web for the latest news about NATS JetStream", 2},
		{nativechat.GLM, "搜索2025年4月的重要财经新闻", 1},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			t.Parallel()
			body := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"` + c.question + `"}],` +
				`"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}`)
			plain := nativechat.New(c.kind, llm.NewClient("sim", srv.URL+"/v1", "k", nativechat.HTTPClient(srv.Client())))
			tr := &startTransport{}
			async := nativechat.New(c.kind, llm.NewClient("sim", srv.URL+"/v1", "k", nativechat.HTTPClient(&http.Client{Transport: tr})))
			for _, stream := range []bool{false, true} {
				var deltas strings.Builder
				var onDelta func(llm.Delta)
				if stream {
					onDelta = func(d llm.Delta) { deltas.WriteString(d.Text) }
				}
				want, err := plain.Complete(context.Background(), body, onDelta)
				if err != nil {
					t.Fatal(err)
				}
				wantDeltas := deltas.String()
				deltas.Reset()
				tr.starts.Store(0)
				got, calls, err := startWait(t, tr, async, context.Background(), body, onDelta)
				if err != nil || calls != 1 {
					t.Fatalf("stream %v: Start: %v, done called %d times", stream, err, calls)
				}
				if string(got.Message) != string(want.Message) || got.FinishReason != want.FinishReason || got.Usage != want.Usage {
					t.Errorf("stream %v: Start gave %s (%s, %+v); Complete %s (%s, %+v)", stream, got.Message, got.FinishReason, got.Usage, want.Message, want.FinishReason, want.Usage)
				}
				msg, n := native(t, got.Message)
				if n == nil || n.Requests != 1 || len(n.Sources) == 0 {
					t.Errorf("stream %v: native report %+v; want the search and its sources", stream, n)
				}
				if stream && (deltas.String() != wantDeltas || deltas.Len() == 0 || !strings.HasPrefix(text(msg["content"]), deltas.String())) {
					t.Errorf("deltas %q; Complete's %q; want the same prefix of the answer", deltas.String(), wantDeltas)
				}
				if tr.starts.Load() != c.requests {
					t.Errorf("stream %v: %d Starts; want %d", stream, tr.starts.Load(), c.requests)
				}
			}
		})
	}
}

// A cancelled Kimi or GLM call ends with the context's error, given to done once.
func TestStartNativeCancelled(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(simulator.New(simulator.Options{}))
	t.Cleanup(srv.Close)
	body := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Search the web for the latest news"}],` +
		`"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}`)
	for _, kind := range []nativechat.Kind{nativechat.Kimi, nativechat.GLM} {
		tr := &startTransport{}
		c := nativechat.New(kind, llm.NewClient("sim", srv.URL+"/v1", "k", nativechat.HTTPClient(&http.Client{Transport: tr})))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		comp, calls, err := startWait(t, tr, c, ctx, body, nil)
		if err != context.Canceled || comp != nil || calls != 1 || tr.starts.Load() != 1 {
			t.Errorf("%s: %v, %v, done called %d times after %d Starts; want context.Canceled once", kind, comp, err, calls, tr.starts.Load())
		}
	}
}

// A GLM call whose first key is rate limited moves on to the next key under Start and
// still reads its search results: the body captured is the answer's, not the refusal's
// before it.
func TestStartGLMRotatesKeyAndKeepsResults(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sim.SetKeyFault("/v1/chat/completions", "key-a", http.StatusTooManyRequests, 20*time.Second, 0)
	body := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"搜索2025年4月的重要财经新闻"}],` +
		`"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}`)
	tr := &startTransport{}
	creds := llm.NewCredentials("sim", []string{"key-a", "key-b"}, llm.CredentialOptions{})
	c := nativechat.New(nativechat.GLM, llm.NewClientWith("sim", srv.URL+"/v1", creds, nativechat.HTTPClient(&http.Client{Transport: tr})))
	comp, calls, err := startWait(t, tr, c, context.Background(), body, nil)
	if err != nil || calls != 1 || tr.starts.Load() != 2 {
		t.Fatalf("%v, done called %d times after %d Starts; want an answer after two", err, calls, tr.starts.Load())
	}
	plain := nativechat.New(nativechat.GLM, llm.NewClientWith("sim", srv.URL+"/v1",
		llm.NewCredentials("sim", []string{"key-a", "key-b"}, llm.CredentialOptions{}), nativechat.HTTPClient(srv.Client())))
	want, err := plain.Complete(context.Background(), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, comp := range map[string]*llm.Completion{"Start": comp, "Complete": want} {
		msg, n := native(t, comp.Message)
		if n == nil || len(n.Sources) != 1 || strings.Contains(text(msg["content"]), "ref_") {
			t.Errorf("%s after a refused key: report %+v, content %q; want the search's sources cited", name, n, text(msg["content"]))
		}
	}
}
