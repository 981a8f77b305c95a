package nativechat_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/llmtest"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// The capture transport GLM reads its search results through stays an
// llm.AsyncTransport over one, and only over one (Start on a base that has none
// would not exist).
func TestHTTPClientKeepsAsyncTransport(t *testing.T) {
	t.Parallel()
	if _, ok := nativechat.HTTPClient(&http.Client{Transport: &llmtest.StartTransport{}}).Transport.(llm.AsyncTransport); !ok {
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
			tr := &llmtest.StartTransport{}
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
				before := tr.Starts()
				o := llmtest.StartWait(t, tr, async, context.Background(), body, onDelta)
				got, calls, err := o.Comp, o.Calls, o.Err
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
				if tr.Starts()-before != c.requests {
					t.Errorf("stream %v: %d Starts; want %d", stream, tr.Starts()-before, c.requests)
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
		tr := &llmtest.StartTransport{}
		c := nativechat.New(kind, llm.NewClient("sim", srv.URL+"/v1", "k", nativechat.HTTPClient(&http.Client{Transport: tr})))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		o := llmtest.StartWait(t, tr, c, ctx, body, nil)
		comp, calls, err := o.Comp, o.Calls, o.Err
		if err != context.Canceled || comp != nil || calls != 1 || tr.Starts() != 1 {
			t.Errorf("%s: %v, %v, done called %d times after %d Starts; want context.Canceled once", kind, comp, err, calls, tr.Starts())
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
	tr := &llmtest.StartTransport{}
	creds := llm.NewCredentials("sim", []string{"key-a", "key-b"}, llm.CredentialOptions{})
	c := nativechat.New(nativechat.GLM, llm.NewClientWith("sim", srv.URL+"/v1", creds, nativechat.HTTPClient(&http.Client{Transport: tr})))
	o := llmtest.StartWait(t, tr, c, context.Background(), body, nil)
	comp, calls, err := o.Comp, o.Calls, o.Err
	if err != nil || calls != 1 || tr.Starts() != 2 {
		t.Fatalf("%v, done called %d times after %d Starts; want an answer after two", err, calls, tr.Starts())
	}
	plain := nativechat.New(nativechat.GLM, llm.NewClientWith("sim", srv.URL+"/v1",
		llm.NewCredentials("sim", []string{"key-a", "key-b"}, llm.CredentialOptions{}), nativechat.HTTPClient(srv.Client())))
	want, err := plain.Complete(context.Background(), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, comp := range map[string]*llm.Completion{"Start": comp, "Complete": want} {
		msg, n := native(t, comp.Message)
		if n == nil || len(n.Sources) != 3 || strings.Contains(text(msg["content"]), "ref_") {
			t.Errorf("%s after a refused key: report %+v, content %q; want the search's sources cited", name, n, text(msg["content"]))
		}
	}
}
