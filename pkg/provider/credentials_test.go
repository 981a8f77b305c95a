package provider_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/provider"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// family is one main-model protocol as the simulator serves it: how a caller of it
// is built, and the path prefix of its endpoint (for standing key faults).
type family struct {
	name string
	path string
	new  func(name, sim string, creds *provider.Credentials, hc *http.Client) llm.Caller
}

var families = []family{
	{"openai-chat", "/v1/chat/completions", func(p, sim string, cr *provider.Credentials, hc *http.Client) llm.Caller {
		return upstreamtest.Chat{Caller: upstream.New(openaichat.Model, p, sim+"/v1", "", hc, upstream.Options{Credentials: cr})}
	}},
	{"openai-responses", "/v1/responses", func(p, sim string, cr *provider.Credentials, hc *http.Client) llm.Caller {
		return upstreamtest.Chat{Caller: upstream.New(responses.Model, p, sim+"/v1", "", hc, upstream.Options{Credentials: cr})}
	}},
	{"gemini", "/v1beta/models/", func(p, sim string, cr *provider.Credentials, hc *http.Client) llm.Caller {
		return upstreamtest.Chat{Caller: upstream.New(gemini.Model, p, sim, "", hc, upstream.Options{Credentials: cr})}
	}},
	{"anthropic-messages", "/v1/messages", func(p, sim string, cr *provider.Credentials, hc *http.Client) llm.Caller {
		return upstreamtest.Chat{Caller: upstream.New(anthropic.Model, p, sim, "", hc, upstream.Options{Credentials: cr})}
	}},
}

// seen counts the credentials of the requests that went through it, by the header
// that carried them: it watches the real HTTP traffic to the simulator.
type seen struct {
	mu  sync.Mutex
	got map[string]int // "bearer:<v>", "x-api-key:<v>", "x-goog-api-key:<v>"
}

func (s *seen) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if s.got == nil {
		s.got = map[string]int{}
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		s.got["bearer:"+v]++
	}
	for _, h := range []string{"x-api-key", "x-goog-api-key"} {
		if v := r.Header.Get(h); v != "" {
			s.got[h+":"+v]++
		}
	}
	s.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// with counts the requests that carried v in any header.
func (s *seen) with(v string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.got {
		if strings.HasSuffix(k, ":"+v) {
			n += c
		}
	}
	return n
}

// worker is one chat worker's caller of a provider: its own Credentials and HTTP
// traffic, the key cooldowns shared through Redis.
type worker struct {
	caller llm.Caller
	creds  *provider.Credentials
	seen   *seen
}

func newWorker(f family, sim, name string, keys []string, o provider.CredentialOptions) worker {
	s := &seen{}
	cr := provider.NewCredentials(name, keys, o)
	return worker{caller: f.new(name, sim, cr, &http.Client{Transport: s, Timeout: 10 * time.Second}), creds: cr, seen: s}
}

func startSim(t *testing.T) (*simulator.Server, string) {
	t.Helper()
	sim := simulator.New(simulator.Options{})
	hs, url, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	return sim, url
}

func modelCooldowns(t *testing.T) provider.Cooldowns {
	rdb, prefix := testenv.Redis(t)
	return state.New(rdb, prefix, time.Hour).Searches.ModelKeyCooldowns()
}

var hello = []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Say hello"}]}`)

// A key that gets a 429 rests for every worker: the call that got it succeeds at once
// with the next key, and a second worker sharing Redis never sends the resting key
// (for the Retry-After the provider asked).
func TestRateLimitedKeyMovesOnAndRestsForEveryWorker(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t)
	cool := modelCooldowns(t)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			a, b := "key-a-"+f.name, "key-b-"+f.name
			sim.SetKeyFault(f.path, a, http.StatusTooManyRequests, 20*time.Second, 0)
			o := provider.CredentialOptions{Cooldowns: cool}
			first := newWorker(f, url, "p-"+f.name, []string{a, b}, o)
			if _, err := first.caller.Complete(context.Background(), hello, nil); err != nil {
				t.Fatalf("with a second key: %v", err)
			}
			if first.seen.with(a) != 1 || first.seen.with(b) != 1 {
				t.Fatalf("first worker sent %v; want key A once (429), then key B", first.seen.got)
			}
			rests, err := cool.Resting(context.Background(), "p-"+f.name, []string{provider.Fingerprint(a), provider.Fingerprint(b)})
			if err != nil {
				t.Fatal(err)
			}
			if rests[0].Reason != provider.RateLimited || rests[0].Left <= 10*time.Second || rests[1].Left != 0 {
				t.Fatalf("rests = %+v; want key A resting for the Retry-After (20s), key B usable", rests)
			}
			second := newWorker(f, url, "p-"+f.name, []string{a, b}, o)
			for range 3 {
				if _, err := second.caller.Complete(context.Background(), hello, nil); err != nil {
					t.Fatalf("second worker: %v", err)
				}
			}
			if second.seen.with(a) != 0 || second.seen.with(b) != 3 {
				t.Fatalf("second worker sent %v; want key B only", second.seen.got)
			}
		})
	}
}

// A key the provider refuses (401) is passed over, rests long, and is reported once
// in the log by its fingerprint: the key itself is in no log line and no error.
func TestRefusedKeyReportedOnceNeverShown(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t)
	cool := modelCooldowns(t)
	for _, f := range []family{families[0], families[2]} {
		t.Run(f.name, func(t *testing.T) {
			bad, good := "sk-refused-secret-"+f.name, "sk-good-secret-"+f.name
			sim.SetKeyFault(f.path, bad, http.StatusUnauthorized, 0, 0)
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			o := provider.CredentialOptions{Cooldowns: cool, Log: log, KeyEnv: "PROVIDER_KEYS"}
			w1 := newWorker(f, url, "auth-"+f.name, []string{bad, good}, o)
			w2 := newWorker(f, url, "auth-"+f.name, []string{bad, good}, o)
			for _, w := range []worker{w1, w1, w2, w1, w2} {
				if _, err := w.caller.Complete(context.Background(), hello, nil); err != nil {
					t.Fatalf("with a good key beside the refused one: %v", err)
				}
			}
			if n := w1.seen.with(bad) + w2.seen.with(bad); n != 1 {
				t.Fatalf("the refused key was sent %d times; want once", n)
			}
			out := logs.String()
			if strings.Count(out, "refused") != 1 || !strings.Contains(out, provider.Fingerprint(bad)) || !strings.Contains(out, "PROVIDER_KEYS") {
				t.Fatalf("log = %q; want one warning naming the key's fingerprint and variable", out)
			}
			// The refused key alone: the error says the provider refused, never the key.
			alone := newWorker(f, url, "alone-"+f.name, []string{bad}, provider.CredentialOptions{Cooldowns: cool, Log: log})
			_, err := alone.caller.Complete(context.Background(), hello, nil)
			var le *llm.Error
			if !errors.As(err, &le) || le.Status != http.StatusUnauthorized || le.Retryable() {
				t.Fatalf("the refused key alone: %v; want a final 401", err)
			}
			// Once resting, it is not sent again: the call fails at once, as refused.
			_, err = alone.caller.Complete(context.Background(), hello, nil)
			if !errors.As(err, &le) || le.Status != http.StatusUnauthorized || alone.seen.with(bad) != 1 {
				t.Fatalf("the resting refused key: %v after %v; want a 401 without a request", err, alone.seen.got)
			}
			for _, s := range []string{logs.String(), err.Error()} {
				for _, k := range []string{bad, good} {
					if strings.Contains(s, k) {
						t.Fatalf("a key shows in %q", s)
					}
				}
			}
		})
	}
}

// When every key rests, the call fails retryably without a request, its RetryAfter
// the soonest rest, so the step comes back when the first key does.
func TestEveryKeyRestingRetriesAfterTheSoonest(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t)
	cool := modelCooldowns(t)
	for _, f := range []family{families[0], families[1]} {
		t.Run(f.name, func(t *testing.T) {
			a, b := "key-a-"+f.name, "key-b-"+f.name
			sim.SetKeyFault(f.path, a, http.StatusTooManyRequests, 40*time.Second, 0)
			sim.SetKeyFault(f.path, b, http.StatusTooManyRequests, 9*time.Second, 0)
			w := newWorker(f, url, "all-"+f.name, []string{a, b}, provider.CredentialOptions{Cooldowns: cool})
			check := func(err error) {
				t.Helper()
				var le *llm.Error
				if !errors.As(err, &le) || !le.Retryable() || le.RetryAfter <= 5*time.Second || le.RetryAfter > 9*time.Second {
					t.Fatalf("every key resting: %v (%+v); want a retryable error with RetryAfter about 9s", err, le)
				}
			}
			_, err := w.caller.Complete(context.Background(), hello, nil)
			check(err)
			if w.seen.with(a) != 1 || w.seen.with(b) != 1 {
				t.Fatalf("sent %v; want each key once", w.seen.got)
			}
			other := newWorker(f, url, "all-"+f.name, []string{a, b}, provider.CredentialOptions{Cooldowns: cool})
			_, err = other.caller.Complete(context.Background(), hello, nil)
			check(err)
			if len(other.seen.got) != 0 {
				t.Fatalf("a worker sent %v while every key rests; want no request", other.seen.got)
			}
		})
	}
}

// A provider with an access token file sends the file's token as a bearer token
// (Gemini too, instead of x-goog-api-key), and picks up a renewed file at once: a
// call refused for the old token is made again with the new one.
func TestAccessTokenFileRenewed(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t)
	for _, f := range []family{families[0], families[2]} {
		t.Run(f.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			old, renewed := "ya29.old-token-"+f.name, "ya29.new-token-"+f.name
			if err := os.WriteFile(path, []byte(old+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			file := &config.File{Providers: map[string]config.Provider{"vertex": {Kind: "gemini", AccessToken: &config.AccessToken{File: path}}}}
			if err := file.Resolve(config.MapLookup(nil)); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			w := newWorker(f, url, "tok-"+f.name, nil, provider.CredentialOptions{Token: file.Providers["vertex"].Token, Log: slog.New(slog.NewTextHandler(&logs, nil))})
			if _, err := w.caller.Complete(context.Background(), hello, nil); err != nil {
				t.Fatal(err)
			}
			if w.seen.got["bearer:"+old] != 1 || len(w.seen.got) != 1 {
				t.Fatalf("sent %v; want the file's token as a bearer token only", w.seen.got)
			}
			// The old token expires (the provider refuses it) as the file is renewed.
			sim.SetKeyFault(f.path, old, http.StatusUnauthorized, 0, 0)
			if err := os.WriteFile(path, []byte(renewed+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := w.caller.Complete(context.Background(), hello, nil); err != nil {
				t.Fatalf("after the file was renewed: %v", err)
			}
			if w.seen.got["bearer:"+renewed] != 1 || w.seen.with(old) != 1 {
				t.Fatalf("sent %v; want the renewed token", w.seen.got)
			}
			// A token refused also after a fresh read fails the call, reported once,
			// without the token.
			sim.SetKeyFault(f.path, renewed, http.StatusUnauthorized, 0, 0)
			for range 2 {
				_, err := w.caller.Complete(context.Background(), hello, nil)
				var le *llm.Error
				if !errors.As(err, &le) || le.Status != http.StatusUnauthorized || strings.Contains(err.Error(), renewed) {
					t.Fatalf("a refused token: %v; want a 401 without the token", err)
				}
			}
			if out := logs.String(); strings.Count(out, "refused the access token") != 1 || strings.Contains(out, renewed) {
				t.Fatalf("log = %q; want one warning without the token", out)
			}
		})
	}
}
