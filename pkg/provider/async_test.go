package provider_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/llmtest"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/provider"
)

// asyncWorker is newWorker with its requests sent through an llmtest.StartTransport.
func asyncWorker(f family, sim, name string, keys []string, o provider.CredentialOptions) (worker, *llmtest.StartTransport) {
	s := &seen{}
	tr := &llmtest.StartTransport{Base: s}
	cr := provider.NewCredentials(name, keys, o)
	return worker{caller: f.new(name, sim, cr, &http.Client{Transport: tr}), creds: cr, seen: s}, tr
}

// Start through an async transport gives the Completion Complete gives through a plain
// client, in every protocol, whole and streamed (the deltas, in order, are the text),
// and every request went through the transport's Start.
func TestStartMatchesComplete(t *testing.T) {
	t.Parallel()
	_, url := startSim(t)
	bodies := map[string][]byte{
		"answer":    []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Say hello in a few words sim:token-delay=1ms"}]}`),
		"tool call": []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Search the web for NATS news"}],"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]}`),
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			plain := f.new("p", url, provider.NewCredentials("p", []string{"k"}, provider.CredentialOptions{}), &http.Client{})
			w, tr := asyncWorker(f, url, "p", []string{"k"}, provider.CredentialOptions{})
			calls := 0
			for name, body := range bodies {
				for _, stream := range []bool{false, true} {
					var deltas []string
					var onDelta func(llm.Delta)
					if stream {
						onDelta = func(d llm.Delta) { deltas = append(deltas, d.Text) }
					}
					want, err := plain.Complete(context.Background(), body, onDelta)
					if err != nil {
						t.Fatalf("%s: Complete: %v", name, err)
					}
					deltas = nil
					got := llmtest.StartWait(t, tr, w.caller, context.Background(), body, onDelta)
					calls++
					if got.Err != nil || got.Calls != 1 {
						t.Fatalf("%s (stream %v): Start: %v, done called %d times", name, stream, got.Err, got.Calls)
					}
					if string(got.Comp.Message) != string(want.Message) || got.Comp.FinishReason != want.FinishReason || got.Comp.Usage != want.Usage {
						t.Errorf("%s (stream %v): Start gave %s (%s, %+v); Complete %s (%s, %+v)", name, stream,
							got.Comp.Message, got.Comp.FinishReason, got.Comp.Usage, want.Message, want.FinishReason, want.Usage)
					}
					text := messageText(t, got.Comp)
					if stream && strings.Join(deltas, "") != text {
						t.Errorf("%s: deltas %q; want the text %q", name, deltas, text)
					}
					if name == "answer" && (text == "" || stream && len(deltas) < 2) {
						t.Errorf("%s (stream %v): text %q in %d deltas; want a streamed answer", name, stream, text, len(deltas))
					}
				}
			}
			if n := tr.Starts(); n != int64(calls) || tr.RoundTrips() != 0 {
				t.Errorf("%d Starts and %d round trips for %d calls; want every call started", n, tr.RoundTrips(), calls)
			}
		})
	}
}

// messageText is the text content of a Completion's message.
func messageText(t *testing.T, c *llm.Completion) string {
	t.Helper()
	m, err := llm.ParseMessage(c.Message)
	if err != nil {
		t.Fatalf("message %s: %v", c.Message, err)
	}
	return llm.Text(m.Content)
}

// Under Start, a key the provider rate limits rests (in Redis) and the same call
// moves on to the next key, started from the refused request's callback; done is
// called once, with the answer.
func TestStartRotatesKeyOn429(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t)
	cool := modelCooldowns(t)
	for _, f := range families {
		for _, stream := range []bool{false, true} {
			name := f.name + map[bool]string{false: "-whole", true: "-streamed"}[stream]
			t.Run(name, func(t *testing.T) {
				a, b := "key-a-start-"+name, "key-b-start-"+name
				sim.SetKeyFault(f.path, a, http.StatusTooManyRequests, 20*time.Second, 0)
				w, tr := asyncWorker(f, url, "start-"+name, []string{a, b}, provider.CredentialOptions{Cooldowns: cool})
				var onDelta func(llm.Delta)
				var streamed strings.Builder
				if stream {
					onDelta = func(d llm.Delta) { streamed.WriteString(d.Text) }
				}
				got := llmtest.StartWait(t, tr, w.caller, context.Background(), hello, onDelta)
				if got.Err != nil || got.Calls != 1 {
					t.Fatalf("Start with a second key: %v, done called %d times", got.Err, got.Calls)
				}
				if w.seen.with(a) != 1 || w.seen.with(b) != 1 || tr.Starts() != 2 || tr.RoundTrips() != 0 {
					t.Fatalf("sent %v in %d Starts, %d round trips; want key A (429), then key B, both started", w.seen.got, tr.Starts(), tr.RoundTrips())
				}
				if stream && streamed.String() != messageText(t, got.Comp) {
					t.Errorf("streamed %q; want the answer %q", streamed.String(), messageText(t, got.Comp))
				}
				rests, err := cool.Resting(context.Background(), "start-"+name, []string{provider.Fingerprint(a), provider.Fingerprint(b)})
				if err != nil {
					t.Fatal(err)
				}
				if rests[0].Left <= 10*time.Second || rests[1].Left != 0 {
					t.Errorf("rests = %+v; want key A resting for the Retry-After, key B usable", rests)
				}
			})
		}
	}
}

// A cancelled call ends with the context's error, given to done once: cancelled before
// Start, while waiting for the headers, and while the answer streams.
func TestStartCancelled(t *testing.T) {
	t.Parallel()
	_, url := startSim(t)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			w, tr := asyncWorker(f, url, "cancel", []string{"k"}, provider.CredentialOptions{})
			before, cancel := context.WithCancel(context.Background())
			cancel()
			got := llmtest.StartWait(t, tr, w.caller, before, hello, nil)
			if got.Err != context.Canceled || got.Comp != nil || got.Calls != 1 {
				t.Errorf("cancelled before: %v, %v, done called %d times; want context.Canceled once", got.Comp, got.Err, got.Calls)
			}

			hang := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Say hello sim:model-hang"}]}`)
			waiting, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			got = llmtest.StartWait(t, tr, w.caller, waiting, hang, nil)
			if got.Err != context.DeadlineExceeded || got.Calls != 1 {
				t.Errorf("deadline while waiting: %v, done called %d times; want context.DeadlineExceeded once", got.Err, got.Calls)
			}

			slow := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Say hello in a few more words sim:token-delay=30ms"}]}`)
			streaming, cancel := context.WithCancel(context.Background())
			deltas := 0
			got = llmtest.StartWait(t, tr, w.caller, streaming, slow, func(llm.Delta) { deltas++; cancel() })
			if got.Err != context.Canceled || got.Calls != 1 || deltas == 0 {
				t.Errorf("cancelled mid-stream after %d deltas: %v, done called %d times; want context.Canceled once", deltas, got.Err, got.Calls)
			}
			if tr.Starts() != 3 {
				t.Errorf("%d Starts; want 3", tr.Starts())
			}
		})
	}
}

// done is called exactly once whatever the path, whole and streamed: an answer, a
// provider's error, a key rotation, every key refused, no key usable (no request at
// all), a body that is not a request.
func TestStartDoneOnceEveryPath(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t)
	cool := modelCooldowns(t)
	for _, f := range families {
		for _, stream := range []bool{false, true} {
			name := f.name + map[bool]string{false: "-whole", true: "-streamed"}[stream]
			t.Run(name, func(t *testing.T) {
				var onDelta func(llm.Delta)
				if stream {
					onDelta = func(llm.Delta) {}
				}
				bad, good := "key-bad-once-"+name, "key-good-once-"+name
				sim.SetKeyFault(f.path, bad, http.StatusTooManyRequests, 30*time.Second, 0)
				o := provider.CredentialOptions{Cooldowns: cool}
				for _, c := range []struct {
					name   string
					w      func() (worker, *llmtest.StartTransport)
					fault  int // a fault of the provider for the next request
					body   []byte
					status int   // 0: an answer
					starts int64 // -1: not checked
				}{
					{"answer", func() (worker, *llmtest.StartTransport) { return asyncWorker(f, url, "ok-"+name, []string{good}, o) }, 0, hello, 0, 1},
					{"provider error", func() (worker, *llmtest.StartTransport) { return asyncWorker(f, url, "err-"+name, []string{good}, o) }, 500, hello, 500, 1},
					{"rotation", func() (worker, *llmtest.StartTransport) {
						return asyncWorker(f, url, "rot-"+name, []string{bad, good}, o)
					}, 0, hello, 0, 2},
					{"every key refused", func() (worker, *llmtest.StartTransport) {
						return asyncWorker(f, url, "refused-"+name, []string{bad}, o)
					}, 0, hello, 429, 1},
					{"every key resting", func() (worker, *llmtest.StartTransport) {
						return asyncWorker(f, url, "refused-"+name, []string{bad}, o)
					}, 0, hello, 429, 0},
				} {
					w, tr := c.w()
					if c.fault != 0 {
						sim.SetFault(f.path, c.fault, 0, 1)
					}
					got := llmtest.StartWait(t, tr, w.caller, context.Background(), c.body, onDelta)
					var le *llm.Error
					switch {
					case got.Calls != 1:
						t.Errorf("%s: done called %d times", c.name, got.Calls)
					case c.status == 0 && (got.Err != nil || got.Comp == nil):
						t.Errorf("%s: %v; want an answer", c.name, got.Err)
					case c.status != 0 && (got.Comp != nil || !errors.As(got.Err, &le) || c.status > 0 && le.Status != c.status):
						t.Errorf("%s: %v, %v; want an error of status %d", c.name, got.Comp, got.Err, c.status)
					}
					if c.starts >= 0 && tr.Starts() != c.starts {
						t.Errorf("%s: %d Starts; want %d", c.name, tr.Starts(), c.starts)
					}
				}
			})
		}
	}
}

// A request the transport cannot send fails as it does through hc.Do, word for word
// (the *url.Error naming the method and URL), with the transport's error inside.
func TestStartTransportErrorWordedAsComplete(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() // nothing listens there once closed
	ln.Close()
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			plain := f.new("p", dead, provider.NewCredentials("p", []string{"k"}, provider.CredentialOptions{}), &http.Client{})
			_, want := plain.Complete(context.Background(), hello, nil)
			w, tr := asyncWorker(f, dead, "p", []string{"k"}, provider.CredentialOptions{})
			got := llmtest.StartWait(t, tr, w.caller, context.Background(), hello, nil)
			var le *llm.Error
			if want == nil || got.Err == nil || got.Err.Error() != want.Error() || !errors.As(got.Err, &le) || le.Err == nil || tr.Starts() != 1 {
				t.Errorf("Start: %v; Complete: %v; want the same error, after a Start", got.Err, want)
			}
		})
	}
}

// A client with a Timeout is sent with hc.Do even over an AsyncTransport: Timeout
// covers reading the body, which only http.Client enforces.
func TestStartWithClientTimeoutUsesDo(t *testing.T) {
	t.Parallel()
	_, url := startSim(t)
	tr := &llmtest.StartTransport{}
	c := upstreamtest.Chat{Caller: upstream.New(wire.ChatModel, "p", url+"/v1", "k", &http.Client{Transport: tr, Timeout: 10 * time.Second}, upstream.Options{})}
	got := llmtest.StartWait(t, tr, c, context.Background(), hello, nil)
	if got.Err != nil || got.Calls != 1 || tr.Starts() != 0 || tr.RoundTrips() != 1 {
		t.Errorf("%v, done called %d times, %d Starts, %d round trips; want one round trip", got.Err, got.Calls, tr.Starts(), tr.RoundTrips())
	}
}

// TryAsync moves on to the next key from the callback of the refused call, on the
// goroutine that callback runs on: nothing waits in TryAsync, which has returned
// before the outcome is known; done is called once, after the last call.
func TestTryAsyncRotatesFromTheCallback(t *testing.T) {
	t.Parallel()
	creds := provider.NewCredentials("p", []string{"key-a", "key-b", "key-c"}, provider.CredentialOptions{})
	var mu sync.Mutex
	var tried []string
	var calls sync.WaitGroup // the goroutines answering the calls
	returned := make(chan struct{})
	outcome := make(chan error, 2)
	creds.TryAsync(context.Background(), nil, func(cred provider.Credential, _ func(llm.Delta), done func(error)) {
		mu.Lock()
		tried = append(tried, cred.Value)
		n := len(tried)
		mu.Unlock()
		calls.Add(1)
		go func() {
			defer calls.Done()
			<-returned
			if n < 3 {
				done(&llm.Error{Provider: "p", Status: http.StatusTooManyRequests, Message: "slow down"})
				return
			}
			done(nil)
		}()
	}, func(err error) { outcome <- err })
	close(returned)
	if err := <-outcome; err != nil {
		t.Fatalf("after two refusals: %v", err)
	}
	calls.Wait()
	if len(outcome) != 0 {
		t.Fatalf("done called again with %v", <-outcome)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(tried, ",") != "key-a,key-b,key-c" {
		t.Errorf("tried %v; want each key once, in turn", tried)
	}
}

// parkingTransport is an llm.AsyncTransport that holds each started request, with no
// goroutine, until release sends them all: what h2async does while a request waits
// for its headers. It sends with a transport of its own, closed by close.
type parkingTransport struct {
	base   http.Transport
	mu     sync.Mutex
	parked []func()
	sends  sync.WaitGroup
}

func (p *parkingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return p.base.RoundTrip(r)
}

func (p *parkingTransport) Start(r *http.Request, done func(*http.Response, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parked = append(p.parked, func() { done(p.base.RoundTrip(r)) })
}

// release sends the parked requests, each answered on a goroutine of its own.
func (p *parkingTransport) release() int {
	p.mu.Lock()
	parked := p.parked
	p.parked = nil
	p.mu.Unlock()
	p.sends.Add(len(parked))
	for _, send := range parked {
		go func() {
			defer p.sends.Done()
			send()
		}()
	}
	return len(parked)
}

// close waits for the sends and closes the idle connections.
func (p *parkingTransport) close() {
	p.sends.Wait()
	p.base.CloseIdleConnections()
}

// settled is the number of goroutines once it stops changing (goroutines of closed
// connections still exiting would hide one a pending call holds).
func settled() int {
	n := runtime.NumGoroutine()
	for same := 0; same < 5; {
		time.Sleep(5 * time.Millisecond)
		if m := runtime.NumGoroutine(); m != n {
			n, same = m, 0
			continue
		}
		same++
	}
	return n
}

// While its request waits for an answer, a started call holds no goroutine in any
// protocol (the transport holds the request), and little memory; released, every
// call completes, done once each.
func TestStartHoldsNoGoroutineWhilePending(t *testing.T) {
	_, url := startSim(t)
	const n = 1000
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			// The released requests share a bounded pool of connections: a thousand
			// dialled at once to the simulator can be refused on a loaded machine (an
			// accept queue overflowing), which is not what this test is about.
			tr := &parkingTransport{base: http.Transport{MaxConnsPerHost: 64}}
			defer tr.close()
			c := f.new("p", url, provider.NewCredentials("p", []string{"k"}, provider.CredentialOptions{}), &http.Client{Transport: tr})
			var ok, calls atomic.Int64
			var all sync.WaitGroup
			all.Add(n)
			goroutines, held := settled(), inUse()
			for range n {
				c.(llmtest.Starter).Start(context.Background(), hello, func(llm.Delta) {}, func(comp *llm.Completion, err error) {
					if err == nil && comp != nil {
						ok.Add(1)
					}
					if calls.Add(1) <= n {
						all.Done()
					}
				})
			}
			pending, perCall := runtime.NumGoroutine()-goroutines, (inUse()-held)/n
			t.Logf("%s: %d pending calls hold %d goroutines and %d bytes each (heap and stacks)", f.name, n, pending, perCall)
			// A goroutine or two of the process's own may come and go meanwhile (an
			// idle connection closing); one a call would be a thousand.
			if pending > n/100 || calls.Load() != 0 {
				t.Fatalf("%d pending calls hold %d goroutines (%d done); want none", n, pending, calls.Load())
			}
			if perCall > 8<<10 {
				t.Errorf("a pending call holds %d bytes; want less than a goroutine's stack", perCall)
			}
			if got := tr.release(); got != n {
				t.Fatalf("%d requests parked; want %d", got, n)
			}
			all.Wait()
			if ok.Load() != n || calls.Load() != n {
				t.Errorf("%d answers from %d calls of done; want %d of each", ok.Load(), calls.Load(), n)
			}
		})
	}
}

// inUse is the memory held in the heap and in goroutine stacks after a collection.
func inUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// A panic while the answer is read on the transport's goroutine (here in onDelta, the
// deepest caller code that runs there) does not take the process down: Send recovers
// it, done is never called (the chat worker's guard retries such a step), and the
// next call works.
func TestStartPanicReadingTheAnswerIsContained(t *testing.T) {
	t.Parallel()
	_, url := startSim(t)
	tr := &llmtest.StartTransport{}
	c := upstreamtest.Chat{Caller: upstream.New(wire.ChatModel, "p", url+"/v1", "k", &http.Client{Transport: tr}, upstream.Options{})}
	var calls atomic.Int64
	c.Start(context.Background(), hello, func(llm.Delta) { panic("a decoder's bug") }, func(*llm.Completion, error) { calls.Add(1) })
	tr.Wait()
	if n := calls.Load(); n != 0 {
		t.Fatalf("done called %d times after a panic in the answer's reading; want 0 (the caller's guard ends the call)", n)
	}
	if got := llmtest.StartWait(t, tr, c, context.Background(), hello, nil); got.Err != nil || got.Calls != 1 {
		t.Fatalf("the next call: %v, done called %d times", got.Err, got.Calls)
	}
}
