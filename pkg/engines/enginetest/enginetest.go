// Package enginetest is the conformance suite every engine kind passes. It stands an
// HTTP server in for the provider, replays recorded payloads from internal/fixtures,
// and checks what every engine must do: parse the happy path, place markers on the
// right characters in non-ASCII text, report an empty result as one, classify 429 (with
// Retry-After), 5xx, 401/403 and malformed bodies, stop on context cancellation, carry
// unicode queries intact, stay race-free under concurrent use and never leak its key.
package enginetest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Response is one recorded provider answer.
type Response struct {
	Status int // 0 means 200
	Header http.Header
	Body   []byte
}

// callBound bounds one search of the suite: a liveness guard (a hung engine fails the
// test), not a speed check. Under -race on a loaded two-core machine, 16 concurrent
// pause_turn searches (about 700 KB of recorded JSON each) took more than 10 s.
const callBound = 2 * time.Minute

// JSON is a 200 answer with a fixture file as its body.
func JSON(fixture string) Response { return Response{Body: fixtures.Read(fixture)} }

// Status is an answer with the given status and a fixture file (or literal JSON when
// fixture starts with '{') as its body.
func Status(code int, fixture string) Response {
	if strings.HasPrefix(fixture, "{") {
		return Response{Status: code, Body: []byte(fixture)}
	}
	return Response{Status: code, Body: fixtures.Read(fixture)}
}

// Suite describes one engine kind to the conformance suite.
type Suite struct {
	// Config is the engine under test. The suite sets BaseURL, APIKeyEnv and APIKey.
	Config engines.Config
	// NoKey marks kinds that send no credential (a self-hosted SearXNG).
	NoKey bool

	// OK answers a successful search: one Response per HTTP call the engine makes for
	// one search (multi-turn kinds such as Kimi list several; Turn picks among them).
	OK []Response
	// CheckOK asserts concrete values of the OK fixture (titles, URLs, markers, cost).
	CheckOK func(t *testing.T, r *engines.Result)
	// Unicode answers with non-ASCII text; CheckUnicode asserts the markers land on the
	// right characters. Nil skips the case (kinds without offsets).
	Unicode      []Response
	CheckUnicode func(t *testing.T, r *engines.Result)
	// Empty answers a search that found nothing; nil skips the case.
	Empty []Response
	// Turn picks which response of a scenario answers a request, for kinds that make
	// several calls per search; nil means the first.
	Turn func(r *http.Request, body []byte) int

	// RateLimited is the kind's 429 answer. The suite adds "Retry-After: 7" unless the
	// response sets its own header or WantRetryAfter is set (a body-borne delay).
	RateLimited    Response
	WantRetryAfter time.Duration
	// ServerError, AuthError: the kind's 5xx and 401/403 answers (defaults: generic).
	ServerError Response
	AuthError   Response

	// QueryOf and KeyOf return the query text and the credential the engine sent in
	// a request; nil skips the cases that read them.
	QueryOf func(r *http.Request, body []byte) string
	KeyOf   func(r *http.Request) string
}

// scenario is what the replay server answers with.
type scenario struct {
	responses []Response
	hang      bool
}

type replay struct {
	s    *Suite
	mu   sync.Mutex
	cur  scenario
	reqs []recorded
}

type recorded struct {
	r    *http.Request
	body []byte
}

func (rp *replay) set(sc scenario) {
	rp.mu.Lock()
	rp.cur = sc
	rp.reqs = nil
	rp.mu.Unlock()
}

func (rp *replay) requests() []recorded {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return append([]recorded(nil), rp.reqs...)
}

func (rp *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := readAll(r)
	rp.mu.Lock()
	sc := rp.cur
	rp.reqs = append(rp.reqs, recorded{r: r.Clone(context.Background()), body: body})
	rp.mu.Unlock()
	if sc.hang {
		<-r.Context().Done()
		return
	}
	i := rp.s.turn(r, body, len(sc.responses))
	if i < 0 || i >= len(sc.responses) {
		http.Error(w, "enginetest: no response for this turn", http.StatusTeapot)
		return
	}
	sc.responses[i].write(w)
}

// turn is the index of the response of n that answers a request (Turn's pick, or
// the first).
func (s *Suite) turn(r *http.Request, body []byte, n int) int {
	if s.Turn == nil || n <= 1 {
		return 0
	}
	return s.Turn(r, body)
}

// write sends r as the stand-in provider's answer (JSON and 200 unless r says).
func (r Response) write(w http.ResponseWriter) {
	for k, vs := range r.Header {
		w.Header()[k] = vs
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(cmp.Or(r.Status, http.StatusOK))
	w.Write(r.Body)
}

var keySeq atomic.Int64

// Run runs the conformance suite for one engine kind: named cases, each gated by what
// the Suite describes (a case the kind lacks it for is skipped, saying why).
func Run(t *testing.T, s Suite) {
	t.Helper()
	keySeen := !s.NoKey && s.KeyOf != nil
	rp := &replay{s: &s}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)

	// The key is handed over resolved, as the config layer does; the variable name
	// only appears in messages.
	secret := fmt.Sprintf("sk-enginetest-%s-%d-SECRET", s.Config.Kind, keySeq.Add(1))
	envName := fmt.Sprintf("ENGINETEST_KEY_%d", keySeq.Add(1))

	cfg := s.Config
	cfg.ID = cmp.Or(cfg.ID, "under-test")
	cfg.BaseURL = srv.URL
	if !s.NoKey {
		cfg.APIKeyEnv, cfg.APIKey = envName, secret
	}
	eng := engine(t, cfg, srv.Client())

	search := func(t *testing.T, q engines.Query) (*engines.Result, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		res, err := eng.Search(ctx, q)
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Fatalf("error leaks the API key: %v", err)
		}
		if res != nil {
			b, _ := json.Marshal(res)
			if strings.Contains(string(b), secret) {
				t.Fatalf("result leaks the API key")
			}
		}
		return res, err
	}
	wantKind := func(t *testing.T, err error, kind engines.ErrorKind) *engines.Error {
		t.Helper()
		var e *engines.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v (%T) is not an *engines.Error", err, err)
		}
		if e.Kind != kind {
			t.Fatalf("error kind = %s, want %s (%v)", e.Kind, kind, err)
		}
		if e.Engine != cfg.ID {
			t.Errorf("error engine = %q, want %q", e.Engine, cfg.ID)
		}
		return e
	}
	// The cases share one replay server, so they run in sequence; kinds run in parallel.
	q := engines.Query{Query: "what is the weather in San Francisco", Count: 5}
	// failWith is the error of a search whose every call is answered with r.
	failWith := func(t *testing.T, r Response) error {
		t.Helper()
		rp.set(scenario{responses: []Response{r, r, r}})
		_, err := search(t, q)
		return err
	}
	// gated runs the named case when the kind has what it needs, else skips it.
	gated := func(name string, has bool, lacks string, body func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			if !has {
				t.Skip("kind " + lacks)
			}
			body(t)
		})
	}

	t.Run("happy path", func(t *testing.T) {
		rp.set(scenario{responses: s.OK})
		res, err := search(t, q)
		if err != nil {
			t.Fatalf("Search: %v", err)
		}
		CheckInvariants(t, res)
		if res.Engine != cfg.ID {
			t.Errorf("Engine = %q, want %q", res.Engine, cfg.ID)
		}
		if len(res.Hits) == 0 && len(res.Citation.Sources) == 0 {
			t.Errorf("no hits and no sources from the happy-path fixture")
		}
		reqs := rp.requests()
		if len(reqs) == 0 {
			t.Fatal("engine made no request")
		}
		if keySeen {
			for _, rq := range reqs {
				if got := s.KeyOf(rq.r); got != secret {
					t.Errorf("credential sent = %q, want the configured key", got)
				}
			}
		}
		if s.CheckOK != nil {
			s.CheckOK(t, res)
		}
	})

	gated("non-ASCII text", s.Unicode != nil, "places no markers from offsets", func(t *testing.T) {
		rp.set(scenario{responses: s.Unicode})
		res, err := search(t, engines.Query{Query: "天气 São Paulo °C"})
		if err != nil {
			t.Fatalf("Search: %v", err)
		}
		CheckInvariants(t, res)
		s.CheckUnicode(t, res)
	})

	gated("empty result", s.Empty != nil, "has no empty-result answer", func(t *testing.T) {
		rp.set(scenario{responses: s.Empty})
		res, err := search(t, q)
		if err != nil {
			t.Fatalf("an empty result is not an error: %v", err)
		}
		CheckInvariants(t, res)
		if len(res.Hits) != 0 {
			t.Errorf("hits = %d, want 0", len(res.Hits))
		}
		if res.Citation.Error != nil {
			t.Errorf("Citation.Error = %+v on an empty result", res.Citation.Error)
		}
	})

	t.Run("429 with Retry-After", func(t *testing.T) {
		r := s.RateLimited
		if r.Body == nil {
			r = Status(429, `{"error":{"message":"rate limited"}}`)
		}
		r.Status = http.StatusTooManyRequests
		want := s.WantRetryAfter
		if r.Header == nil && want == 0 {
			r.Header = http.Header{"Retry-After": {"7"}}
			want = 7 * time.Second
		}
		e := wantKind(t, failWith(t, r), engines.RateLimited)
		if e.RetryAfter != want {
			t.Errorf("RetryAfter = %s, want %s", e.RetryAfter, want)
		}
		if !e.Retryable() {
			t.Error("a rate-limited error must be retryable")
		}
	})

	t.Run("5xx", func(t *testing.T) {
		r := s.ServerError
		if r.Body == nil {
			r = Status(503, `{"error":{"message":"upstream overloaded"}}`)
		}
		e := wantKind(t, failWith(t, r), engines.Unavailable)
		if !e.Retryable() {
			t.Error("a 5xx must be retryable")
		}
	})

	t.Run("401 and 403", func(t *testing.T) {
		for _, code := range []int{401, 403} {
			r := s.AuthError
			if r.Body == nil {
				r = Status(code, `{"error":{"message":"invalid credentials"}}`)
			}
			r.Status = code
			e := wantKind(t, failWith(t, r), engines.Auth)
			if e.Retryable() {
				t.Error("an auth error must not be retryable")
			}
		}
	})

	gated("no secret in errors", !s.NoKey, "sends no key, so it has none to leak", func(t *testing.T) {
		echo := Status(401, fmt.Sprintf(`{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"},"detail":"%s","message":"%s"}`, secret, secret, secret))
		if failWith(t, echo) == nil { // search fails the test if the key shows
			t.Fatal("want an error")
		}
	})

	gated("a refused key passes the search to the next key", keySeen, "sends no key the suite can read", func(t *testing.T) {
		for _, code := range []int{http.StatusTooManyRequests, http.StatusUnauthorized} {
			first, second := secret+"-first", secret+"-second"
			var mu sync.Mutex
			var sent []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body := readAll(r)
				key := s.KeyOf(r)
				mu.Lock()
				sent = append(sent, key)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				if key != second {
					w.WriteHeader(code)
					fmt.Fprintf(w, `{"error":{"message":"refused (HTTP %d)"}}`, code)
					return
				}
				w.Write(s.OK[s.turn(r, body, len(s.OK))].Body)
			}))
			kc := cfg
			kc.BaseURL, kc.APIKey, kc.APIKeys = srv.URL, "", []string{first, second}
			eng := engine(t, kc, srv.Client())
			// Round robin: of two searches, one starts on each key, and both succeed.
			for range 2 {
				if _, err := eng.Search(context.Background(), q); err != nil {
					t.Fatalf("HTTP %d on the first key: search failed instead of using the second: %v", code, err)
				}
			}
			srv.Close()
			mu.Lock()
			if !slices.Contains(sent, first) || !slices.Contains(sent, second) {
				t.Errorf("HTTP %d: keys sent %d times; want both keys tried", code, len(sent))
			}
			mu.Unlock()
		}
	})

	t.Run("malformed body", func(t *testing.T) {
		wantKind(t, failWith(t, Response{Body: []byte(`{"id": "x", "choices": [ {"message": `)}), engines.Decode)
	})

	t.Run("context cancellation", func(t *testing.T) {
		rp.set(scenario{hang: true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := eng.Search(ctx, q)
			done <- err
		}()
		waitFor(t, func() bool { return len(rp.requests()) > 0 })
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want one wrapping context.Canceled", err)
			}
			wantKind(t, err, engines.Canceled)
		case <-time.After(5 * time.Second):
			t.Fatal("Search did not return after its context was cancelled")
		}
	})

	gated("unicode and special characters in the query", s.QueryOf != nil, "has no QueryOf", func(t *testing.T) {
		rp.set(scenario{responses: s.OK})
		weird := `C++ & "quotes" <tags> 100% /?#= 東京の天気 ☃ 🚀 naïve`
		if _, err := search(t, engines.Query{Query: weird}); err != nil {
			t.Fatalf("Search: %v", err)
		}
		reqs := rp.requests()
		if len(reqs) == 0 {
			t.Fatal("no request")
		}
		if got := s.QueryOf(reqs[0].r, reqs[0].body); !strings.Contains(got, weird) {
			t.Errorf("query sent = %q, want it to contain %q", got, weird)
		}
	})

	t.Run("empty query is refused before any call", func(t *testing.T) {
		rp.set(scenario{responses: s.OK})
		_, err := search(t, engines.Query{Query: "  \t "})
		wantKind(t, err, engines.BadRequest)
		if n := len(rp.requests()); n != 0 {
			t.Errorf("engine made %d request(s) for an empty query", n)
		}
	})

	t.Run("concurrent use", func(t *testing.T) {
		rp.set(scenario{responses: s.OK})
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), callBound)
				defer cancel()
				res, err := eng.Search(ctx, engines.Query{Query: fmt.Sprintf("query %d", i)})
				if err != nil {
					errs <- err
					return
				}
				if res.Engine != cfg.ID {
					errs <- fmt.Errorf("engine %q", res.Engine)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// CheckInvariants asserts what every successful result satisfies: every [n] in
// LLMContent and Summary numbers an entry of Sources, every source and hit URL is
// absolute http(s), the text the model reads is non-empty.
func CheckInvariants(t *testing.T, r *engines.Result) {
	t.Helper()
	if r == nil {
		t.Fatal("nil result")
	}
	if r.Citation.LLMContent == "" {
		t.Error("LLMContent is empty")
	}
	if r.Citation.ReturnDisplay == "" {
		t.Error("ReturnDisplay is empty")
	}
	for _, text := range []string{r.Summary, r.Citation.LLMContent} {
		for _, n := range engines.Markers(text) {
			if n < 1 || n > len(r.Citation.Sources) {
				t.Errorf("marker [%d] numbers no source (have %d)", n, len(r.Citation.Sources))
			}
		}
	}
	for i, s := range r.Citation.Sources {
		if u, ok := engines.CleanURL(s.Web.URI); !ok || u != s.Web.URI {
			t.Errorf("source %d URI %q is not absolute http(s)", i+1, s.Web.URI)
		}
	}
	for i, h := range r.Hits {
		if u, ok := engines.CleanURL(h.URL); !ok || u != h.URL {
			t.Errorf("hit %d URL %q is not absolute http(s)", i+1, h.URL)
		}
	}
	if r.Usage.Searches < 1 {
		t.Errorf("Usage.Searches = %d, want ≥ 1", r.Usage.Searches)
	}
}

// MarkerAfter asserts that text contains marker right after the first occurrence of
// phrase, i.e. that an offset-based marker landed on the right character.
func MarkerAfter(t *testing.T, text, phrase, marker string) {
	t.Helper()
	i := strings.Index(text, phrase)
	if i < 0 {
		t.Errorf("text does not contain %q", phrase)
		return
	}
	if rest := text[i+len(phrase):]; !strings.HasPrefix(rest, marker) {
		t.Errorf("after %q comes %q, want marker %s", phrase, rest[:min(len(rest), 20)], marker)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Request is a request an engine made, as the stand-in provider saw it.
type Request struct {
	Method string
	Path   string // path and query string
	Header http.Header
	Body   []byte
}

// Do runs one search of an engine configured by cfg against a stand-in provider that
// answers its calls with resps in order (the last one repeats), and returns the result,
// the error and the requests the engine made. The API key is "sk-test-key" unless
// cfg.APIKey is set.
//
//lint:ignore ST1008 the requests come last: callers read them after the outcome
func Do(t *testing.T, cfg engines.Config, q engines.Query, resps ...Response) (*engines.Result, error, []Request) {
	t.Helper()
	var (
		mu   sync.Mutex
		reqs []Request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := readAll(r)
		mu.Lock()
		i := min(len(reqs), len(resps)-1)
		reqs = append(reqs, Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		mu.Unlock()
		resps[i].write(w)
	}))
	defer srv.Close()
	cfg.ID = cmp.Or(cfg.ID, "under-test")
	cfg.BaseURL = srv.URL
	if cfg.APIKey == "" {
		cfg.APIKeyEnv, cfg.APIKey = "ENGINETEST_FIXED_KEY", "sk-test-key"
	}
	eng := engine(t, cfg, srv.Client())
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	res, err := eng.Search(ctx, q)
	mu.Lock()
	defer mu.Unlock()
	return res, err, reqs
}

// Search is Do for a search that must succeed; it also checks CheckInvariants.
func Search(t *testing.T, cfg engines.Config, q engines.Query, resps ...Response) (*engines.Result, []Request) {
	t.Helper()
	res, err, reqs := Do(t, cfg, q, resps...)
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	CheckInvariants(t, res)
	return res, reqs
}

// engine is the engine cfg configures, calling its provider over hc.
func engine(t *testing.T, cfg engines.Config, hc *http.Client) engines.Engine {
	t.Helper()
	reg, err := engines.FromConfig([]engines.Config{cfg}, hc)
	if err != nil {
		t.Fatalf("FromConfig: %v", err)
	}
	eng, _ := reg.Get(cfg.ID)
	return eng
}

func readAll(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}
