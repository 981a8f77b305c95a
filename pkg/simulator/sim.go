// Package simulator is the built-in provider simulator: an HTTP server that speaks the
// main model's protocol (OpenAI chat completions, as a scripted model) and every search
// engine kind's wire format. Its search results are generated from the query
// (results.go) in the shapes of the recorded fixtures in internal/fixtures; a query
// with "sim:fixture" gets the recorded fixture itself.
// Tests, benchmarks and `make run` point the real adapters at it; only the base URL
// differs from production. Everything it answers is labelled as simulated.
//
// Layout: the main model is at /v1/chat/completions; engine kind K lives under /K, so
// an engine configured with BaseURL "<sim>/K" appends its native path ("/search",
// "/v1beta/models/…:generateContent") and lands on the kind's handler.
//
// Faults are injected two ways. A query (or user message) containing a directive does
// it per request: "sim:429" (with Retry-After: 1), "sim:500", "sim:hang",
// "sim:slow=250ms", "sim:empty" (and "sim:fixture", the recorded answer). POST /_sim/faults sets a standing fault for a path
// prefix: {"prefix":"/brave","status":429,"retryAfter":"2s","times":3} or
// {"prefix":"/v1/chat","hang":true}; with "key", a standing fault applies only to
// requests carrying that credential ({"prefix":"/brave","key":"k1","status":401}), so
// tests can fail one API key of several. GET /_sim/stats counts requests per route and the
// requests whose body repeated an earlier one exactly (a paid call made twice).
package simulator

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Options tune the simulator.
type Options struct {
	// ModelLatency is added to every main-model answer.
	ModelLatency time.Duration
	// EngineLatency is added to every engine answer.
	EngineLatency time.Duration
	// ModelLatencyMax and EngineLatencyMax, when above their latencies, make each
	// answer's latency a value between the two, drawn from the request's bytes (the
	// same request waits the same time): "model 1–3 s, search 0.3–0.8 s".
	ModelLatencyMax, EngineLatencyMax time.Duration
	// AgentQueued and AgentRunning are how long a simulated research agent's run
	// stays queued and then running (0: 2 s and 8 s); see sim_agents.go.
	AgentQueued, AgentRunning time.Duration
}

// between is a latency from lo to hi drawn from body's hash (lo when hi ≤ lo).
func between(lo, hi time.Duration, body []byte) time.Duration {
	if hi <= lo {
		return lo
	}
	sum := sha256.Sum256(body)
	n := uint64(sum[0])<<24 | uint64(sum[1])<<16 | uint64(sum[2])<<8 | uint64(sum[3])
	return lo + time.Duration(n%uint64(hi-lo+1))
}

// Server is the simulator.
type Server struct {
	opts  Options
	mux   *http.ServeMux
	stats stats

	mu     sync.Mutex
	faults []*fault

	agents *agentSim
}

// New builds a simulator with every route registered.
func New(opts Options) *Server {
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.stats.seen = make(map[[32]byte]struct{})
	s.stats.requests = make(map[string]int64)
	s.stats.dups = make(map[string]int64)
	s.mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("POST /v1/responses", s.openAIResponses)
	s.mux.HandleFunc("POST /v1/agent", s.perplexityAgentModel)
	s.mux.HandleFunc("POST /parallel/v1/extract", s.parallelExtract)
	s.mux.HandleFunc("POST /v1/messages", s.anthropicMessages)
	s.mux.HandleFunc("POST /v1beta/models/{call}", s.geminiGenerate)
	for _, rt := range s.engineRoutes() {
		s.mux.HandleFunc(rt.pattern, s.serveEngine(rt))
	}
	s.agents = newAgentSim(s)
	s.agentRoutes()
	s.mux.HandleFunc("GET /_sim/stats", s.getStats)
	s.mux.HandleFunc("POST /_sim/reset", s.reset)
	s.mux.HandleFunc("POST /_sim/faults", s.setFault)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "searchfleet provider SIMULATOR: scripted main model at /v1/chat/completions, engine kinds under /<kind>/")
	})
	return s
}

// ServeHTTP serves the simulator.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Simulator", "searchfleet")
	s.mux.ServeHTTP(w, r)
}

// Listen serves the simulator on addr ("127.0.0.1:0" for any port) until the returned
// server is closed, and returns its base URL.
func (s *Server) Listen(addr string) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return hs, "http://" + ln.Addr().String(), nil
}

// engineRoute is one engine kind's endpoint.
type engineRoute struct {
	// kind is the engine kind; it names the stats counter.
	kind string
	// pattern is the ServeMux pattern, "POST /tavily/search".
	pattern string
	// queryOf extracts the search text from a request, for directives.
	queryOf func(r *http.Request, body []byte) string
	// answer returns the 200 body for a request (called after faults are applied):
	// the pages generated from the query, in the kind's wire shape. A kind without
	// one answers render(ask(…)).
	answer func(r *http.Request, body []byte, query string) []byte
	// ask reads the search a request asks for; render writes its pages.
	ask    func(r *http.Request, body []byte, query string) searchAsk
	render func(searchAsk) []byte
	// fixture names the recorded fixture the kind's answers are shaped on, answered
	// verbatim for a query with "sim:fixture" (a kind without one answers that itself).
	fixture string
	// empty is a 200 body with no results, for "sim:empty"; nil means the kind has
	// none and the directive is ignored.
	empty []byte
	// errorBody returns the kind's error body for a status; nil means a generic
	// {"error":{"message"}} envelope.
	errorBody func(status int) []byte
	// model is the model an engine of this kind is configured with (LLM kinds).
	model string
	// options are the engine options a config for this kind needs, if any.
	options string
}

// engineRoutes lists every engine kind's endpoints.
func (s *Server) engineRoutes() []engineRoute {
	return slices.Concat(tavilyRoutes(), groundedRoutesA(), groundedRoutesB(), classicRoutes(), lowCostRoutes())
}

// EngineConfigs returns one engine per kind the simulator serves, each pointed at the
// simulator at base and named after its kind, with SIM_API_KEY as its key variable
// and "sim-key" as its key (the simulator accepts any).
func (s *Server) EngineConfigs(base string) []engines.Config {
	var out []engines.Config
	for _, rt := range s.engineRoutes() {
		if slices.ContainsFunc(out, func(c engines.Config) bool { return c.Kind == rt.kind }) {
			continue // gemini's second route (Vertex AI)
		}
		c := engines.Config{ID: rt.kind, Kind: rt.kind, BaseURL: base + "/" + rt.kind, Model: rt.model, APIKeyEnv: "SIM_API_KEY", APIKey: "sim-key"}
		if rt.options != "" {
			c.Options = json.RawMessage(rt.options)
		}
		out = append(out, c)
	}
	return out
}

func (s *Server) serveEngine(rt engineRoute) http.HandlerFunc {
	var recorded []byte
	if rt.fixture != "" {
		recorded = fixtures.Read(rt.fixture)
	}
	if rt.answer == nil {
		rt.answer = func(r *http.Request, body []byte, q string) []byte { return rt.render(rt.ask(r, body, q)) }
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readCounted(w, r, 8<<20, rt.kind, r.URL.RawQuery)
		if !ok {
			return
		}
		q := rt.queryOf(r, body)
		if !s.applyFaults(w, r, rt.kind, r.URL.Path, q, rt.errorBody, between(s.opts.EngineLatency, s.opts.EngineLatencyMax, body)) {
			return
		}
		switch {
		case rt.empty != nil && strings.Contains(q, "sim:empty"):
			writeJSON(w, rt.empty)
		case recorded != nil && strings.Contains(q, "sim:fixture"):
			writeJSON(w, recorded)
		default:
			writeJSON(w, rt.answer(r, body, q))
		}
	}
}

// readCounted reads a request body of at most limit bytes and counts it under route
// (extra: what else tells requests apart); false when it could not be read (answered).
func (s *Server) readCounted(w http.ResponseWriter, r *http.Request, limit int64, route, extra string) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	s.stats.count(route, body, extra)
	return body, true
}

// applyFaults applies latency, directives and standing faults. It returns false when
// it has answered the request itself.
func (s *Server) applyFaults(w http.ResponseWriter, r *http.Request, kind, path, text string, errorBody func(int) []byte, latency time.Duration) bool {
	d := parseDirectives(text)
	if f := s.takeFault(path, requestKey(r)); f != nil {
		d.merge(f)
	}
	for k, v := range d.Headers {
		w.Header().Set(k, v)
	}
	if delay := latency + time.Duration(d.Slow); delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return false
		}
	}
	if d.Hang {
		<-r.Context().Done()
		return false
	}
	if d.Status == 0 {
		return true
	}
	if d.Status == http.StatusTooManyRequests {
		ra := cmp.Or(time.Duration(d.RetryAfter), time.Second)
		w.Header().Set("Retry-After", strconv.FormatFloat(ra.Seconds(), 'f', -1, 64))
	}
	if errorBody == nil {
		errorBody = func(status int) []byte {
			return fmt.Appendf(nil, `{"error":{"message":"simulated %s failure (HTTP %d)","type":"simulator_error","code":%d}}`, kind, status, status)
		}
	}
	writeError(w, d.Status, errorBody(d.Status))
	return false
}

var directiveRE = regexp.MustCompile(`sim:(429|500|502|503|401|403|hang|slow=[0-9.]+(?:ms|s))`)

// parseDirectives reads the faults a request's text asks for.
func parseDirectives(text string) fault {
	var d fault
	if !strings.Contains(text, "sim:") {
		return d
	}
	for _, m := range directiveRE.FindAllStringSubmatch(text, -1) {
		switch v := m[1]; {
		case v == "hang":
			d.Hang = true
		case strings.HasPrefix(v, "slow="):
			slow, _ := time.ParseDuration(strings.TrimPrefix(v, "slow="))
			d.Slow = duration(slow)
		default:
			d.Status, _ = strconv.Atoi(v)
		}
	}
	return d
}

// merge adds the standing fault f to a request's own faults d.
func (d *fault) merge(f *fault) {
	if f.Status != 0 {
		d.Status, d.RetryAfter = f.Status, f.RetryAfter
	}
	d.Hang = d.Hang || f.Hang
	d.Slow += f.Slow
	d.Headers = f.Headers
}

// fault is a standing fault set through POST /_sim/faults, or the faults a request's
// directives ask for (parseDirectives).
type fault struct {
	Prefix     string   `json:"prefix"`
	Status     int      `json:"status,omitempty"`
	RetryAfter duration `json:"retryAfter,omitempty"`
	Hang       bool     `json:"hang,omitempty"`
	Slow       duration `json:"slow,omitempty"`
	// Times is how many requests the fault applies to; 0 means until reset.
	Times int `json:"times,omitempty"`
	// Key limits the fault to requests carrying this credential (any, when empty).
	Key string `json:"key,omitempty"`
	// Headers are added to the answer, failed or not ({"Sunset": "…"}: a provider
	// announcing its endpoint's retirement).
	Headers map[string]string `json:"headers,omitempty"`
}

func (s *Server) setFault(w http.ResponseWriter, r *http.Request) {
	var f fault
	if err := json.NewDecoder(r.Body).Decode(&f); err != nil || f.Prefix == "" {
		http.Error(w, `want {"prefix":"/brave","status":429,...}`, http.StatusBadRequest)
		return
	}
	s.addFault(&f)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) addFault(f *fault) {
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
}

// SetFault installs a standing fault (the Go form of POST /_sim/faults): requests whose
// path starts with prefix get status (429s with Retry-After retryAfter), times times
// (0: until Reset).
func (s *Server) SetFault(prefix string, status int, retryAfter time.Duration, times int) {
	s.addFault(&fault{Prefix: prefix, Status: status, RetryAfter: duration(retryAfter), Times: times})
}

// SetSlowFault delays the answers of requests whose path starts with prefix by slow
// (times: how many; 0, all).
func (s *Server) SetSlowFault(prefix string, slow time.Duration, times int) {
	s.addFault(&fault{Prefix: prefix, Slow: duration(slow), Times: times})
}

// SetHeaderFault adds headers to the answers of requests whose path starts with
// prefix, times times (0: until Reset).
func (s *Server) SetHeaderFault(prefix string, headers map[string]string, times int) {
	s.addFault(&fault{Prefix: prefix, Headers: headers, Times: times})
}

// SetKeyFault is SetFault for the requests carrying one credential (the API key of
// whichever header or parameter the engine kind sends it in).
func (s *Server) SetKeyFault(prefix, key string, status int, retryAfter time.Duration, times int) {
	s.addFault(&fault{Prefix: prefix, Key: key, Status: status, RetryAfter: duration(retryAfter), Times: times})
}

// requestKey is the credential a request carries, in any of the places the engine
// kinds put it.
func requestKey(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return v
	}
	for _, h := range []string{"X-Subscription-Token", "X-Api-Key", "X-Goog-Api-Key"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return r.URL.Query().Get("key")
}

func (s *Server) takeFault(path, key string) *fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if strings.HasPrefix(path, f.Prefix) && (f.Key == "" || f.Key == key) {
			if f.Times > 0 {
				f.Times--
				if f.Times == 0 {
					s.faults = slices.Delete(s.faults, i, i+1)
				}
			}
			return f
		}
	}
	return nil
}

type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = duration(v)
	return err
}

// stats counts requests per route and exact repeats of a request body.
type stats struct {
	mu       sync.Mutex
	requests map[string]int64
	dups     map[string]int64
	// seen and older hold the digests of the requests seen lately: a repeat is found
	// among the last seenWindow to 2×seenWindow requests, and a long benchmark or a
	// fleet run for days holds at most 2×seenWindow digests, not one per request.
	seen, older map[[32]byte]struct{}
}

// seenWindow is how many request digests each generation of stats.seen holds.
const seenWindow = 1 << 16

func (st *stats) count(route string, body []byte, extra string) {
	h := sha256.New()
	h.Write([]byte(route))
	h.Write(body)
	h.Write([]byte(extra))
	sum := [32]byte(h.Sum(nil))
	st.mu.Lock()
	defer st.mu.Unlock()
	st.requests[route]++
	_, dup := st.seen[sum]
	if _, old := st.older[sum]; dup || old {
		st.dups[route]++
		return
	}
	if len(st.seen) >= seenWindow {
		st.older, st.seen = st.seen, make(map[[32]byte]struct{}, seenWindow)
	}
	st.seen[sum] = struct{}{}
}

// Stats is a snapshot of what the simulator has been asked.
type Stats struct {
	// Requests counts requests per route: "model" for the main model, the kind name
	// for engines; "model_offered_web_search" counts model requests whose tools
	// included web_search; "model_file", "model_file_text" and "model_file_url" count
	// model requests that carried a file natively, as text or by its URL
	// (sim_model_files.go).
	Requests map[string]int64 `json:"requests"`
	// Duplicates counts requests whose route and body exactly repeated an earlier one.
	Duplicates map[string]int64 `json:"duplicates"`
	// AgentSubmissions counts research agent submissions per "kind|fleet reference"
	// (sim_agents.go).
	AgentSubmissions map[string]int `json:"agentSubmissions"`
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return Stats{
		Requests:         maps.Clone(s.stats.requests),
		Duplicates:       maps.Clone(s.stats.dups),
		AgentSubmissions: s.agents.submissionCounts(),
	}
}

// Reset clears the counters and the standing faults.
func (s *Server) Reset() {
	s.stats.mu.Lock()
	clear(s.stats.requests)
	clear(s.stats.dups)
	clear(s.stats.seen)
	s.stats.older = nil
	s.stats.mu.Unlock()
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
	s.agents.reset()
}

func (s *Server) getStats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.Stats())
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}
