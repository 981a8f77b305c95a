package provider_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/provider"
)

// total counts the requests that went through s.
func (s *seen) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.got {
		n += c
	}
	return n
}

// A cancelled call ends with the context's error in every protocol: cancelled before
// the call, while waiting for the headers, and while the answer streams.
func TestCompleteCancelled(t *testing.T) {
	t.Parallel()
	_, url := startSim(t)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			w := newWorker(f, url, "cancel", []string{"k"}, provider.CredentialOptions{})
			before, cancel := context.WithCancel(context.Background())
			cancel()
			if comp, err := w.caller.Complete(before, hello, nil); !errors.Is(err, context.Canceled) || comp != nil {
				t.Errorf("cancelled before: %v, %v; want context.Canceled", comp, err)
			}

			hang := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Say hello sim:model-hang"}]}`)
			waiting, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if _, err := w.caller.Complete(waiting, hang, nil); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("deadline while waiting: %v; want context.DeadlineExceeded", err)
			}

			slow := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Say hello in a few more words sim:token-delay=30ms"}]}`)
			streaming, cancel := context.WithCancel(context.Background())
			deltas := 0
			if _, err := w.caller.Complete(streaming, slow, func(llm.Delta) { deltas++; cancel() }); !errors.Is(err, context.Canceled) || deltas == 0 {
				t.Errorf("cancelled mid-stream after %d deltas: %v; want context.Canceled", deltas, err)
			}
		})
	}
}

// Every path of a call ends in its one outcome, whole and streamed, with the requests
// it should have made: an answer, a provider's error, a key rotation, every key
// refused, no key usable (no request at all).
func TestCompleteEveryPath(t *testing.T) {
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
					name     string
					provider string
					keys     []string
					fault    int // a fault of the provider for the next request
					status   int // 0: an answer
					requests int
				}{
					{"answer", "ok-" + name, []string{good}, 0, 0, 1},
					{"provider error", "err-" + name, []string{good}, 500, 500, 1},
					{"rotation", "rot-" + name, []string{bad, good}, 0, 0, 2},
					{"every key refused", "refused-" + name, []string{bad}, 0, 429, 1},
					{"every key resting", "refused-" + name, []string{bad}, 0, 429, 0},
				} {
					w := newWorker(f, url, c.provider, c.keys, o)
					if c.fault != 0 {
						sim.SetFault(f.path, c.fault, 0, 1)
					}
					comp, err := w.caller.Complete(context.Background(), hello, onDelta)
					var le *llm.Error
					switch {
					case c.status == 0 && (err != nil || comp == nil):
						t.Errorf("%s: %v; want an answer", c.name, err)
					case c.status != 0 && (comp != nil || !errors.As(err, &le) || le.Status != c.status):
						t.Errorf("%s: %v, %v; want an error of status %d", c.name, comp, err, c.status)
					}
					if n := w.seen.total(); n != c.requests {
						t.Errorf("%s: %d requests; want %d", c.name, n, c.requests)
					}
				}
			})
		}
	}
}
