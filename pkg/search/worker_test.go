package search_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// rig is the parts of search workers: an embedded NATS JetStream with the fleet's
// streams, the Redis store over miniredis (redistest), and the provider simulator over
// HTTP.
type rig struct {
	t     *testing.T
	bus   *bus.Bus
	store *state.Store
	sim   *simulator.Server
	cfgs  map[string]engines.Config
	hc    *httptest.Server
	// natsURL is the embedded server's, for a worker on a connection of its own.
	natsURL string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	b, url := bustest.New(t)
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	r := &rig{t: t, bus: b, store: redistest.Store(t), sim: sim, cfgs: map[string]engines.Config{}, hc: srv, natsURL: url}
	for _, c := range sim.EngineConfigs(srv.URL) {
		r.cfgs[c.ID] = c
	}
	return r
}

// worker builds one search worker, as one process would: its own engine registry
// (key rotation counters), sharing the store and NATS with the others.
func (r *rig) worker(id string, settings map[string]search.Settings, log *slog.Logger, cfgs ...engines.Config) *search.Worker {
	r.t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg, err := engines.FromConfigWith(cfgs, r.hc.Client(), engines.Options{Cooldowns: r.store.Searches, Log: log})
	if err != nil {
		r.t.Fatal(err)
	}
	return &search.Worker{Bus: r.bus, Store: search.StoreOf(r.store), Engines: reg, Settings: settings, Timeout: 5 * time.Second,
		LeaseTTL: 3 * time.Second, Metrics: metrics.New(), Log: log, ID: id}
}

// job creates a running chat job and returns a search request of it.
func (r *rig) job(id, engine string) search.Request {
	r.t.Helper()
	dl := time.Now().Add(time.Minute)
	if err := r.store.Jobs.CreateJob(context.Background(), &state.Job{ID: id, Kind: "chat", Model: "m", Deadline: dl}); err != nil {
		r.t.Fatal(err)
	}
	return search.Request{JobID: id, CallID: "c1", Engine: engine, Query: engines.Query{Query: "latest news about NATS JetStream"}, Deadline: dl}
}

func handle(t *testing.T, w *search.Worker, req search.Request, attempt int) {
	t.Helper()
	if err := w.Handle(context.Background(), &bus.Delivery[search.Request]{Msg: req, Attempt: attempt, MaxDeliver: 5}); err != nil {
		t.Fatalf("Handle(%s, attempt %d): %v", req.Engine, attempt, err)
	}
}

// stored returns how many messages a subject holds in a stream, and the last one.
func stored[T bus.Payload](t *testing.T, b *bus.Bus, stream, subject string) (int, T) {
	t.Helper()
	var zero T
	ctx := context.Background()
	s, err := b.RawJetStream().Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	// subject's lanes (subject.<band>.<tenant>) are counted with it.
	lanes := subject + ".>"
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(lanes))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	if n == 0 {
		return 0, zero
	}
	m, err := s.GetLastMsgForSubject(ctx, lanes)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := bus.Decode[T](m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return n, v
}

// A standing 503 on brave, whose fallback is tavily: the call is handed to tavily's
// subject, tavily's worker answers with tavily's sources, the result says so, and
// brave is called once however often its message is redelivered — before and after
// the call is answered.
func TestFallbackHandsTheCallOnAndNeverRepaysTheFailedEngine(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	settings := map[string]search.Settings{"brave": {Fallback: []string{"tavily"}}}
	w := r.worker("w1", settings, nil, r.cfgs["brave"], r.cfgs["tavily"])
	r.sim.SetFault("/brave", 503, 0, 0)
	req := r.job("j-fallback", "brave")

	handle(t, w, req, 1)
	n, fwd := stored[search.Request](t, r.bus, bus.StreamSearch, bus.SubjectSearch("tavily"))
	if n != 1 || fwd.Engine != "tavily" || fwd.Origin != "brave" || len(fwd.Tried) != 1 || fwd.Tried[0] != (search.Attempt{Engine: "brave", Reason: "unavailable"}) {
		t.Fatalf("hand-off: %d messages, last %+v", n, fwd)
	}
	if id := fwd.MsgID(); id != "j-fallback:0:c1:fallback-1" {
		t.Errorf("hand-off message id %q", id)
	}
	// A redelivery of brave's message passes the call on again without calling brave;
	// the stream drops the second hand-off as a duplicate.
	handle(t, w, req, 2)
	if got := r.sim.Stats().Requests["brave"]; got != 1 {
		t.Fatalf("brave called %d times, want 1", got)
	}
	if n, _ := stored[search.Request](t, r.bus, bus.StreamSearch, bus.SubjectSearch("tavily")); n != 1 {
		t.Fatalf("tavily's subject holds %d hand-offs, want 1", n)
	}

	handle(t, w, fwd, 1)
	n, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
	if n != 1 {
		t.Fatalf("%d results published, want 1", n)
	}
	if done.Engine != "brave" || done.Result.Engine != "tavily" || done.Result.Citation.Error != nil || len(done.Result.Citation.Sources) == 0 {
		t.Fatalf("result: engine %q, result engine %q, error %+v, %d sources", done.Engine, done.Result.Engine, done.Result.Citation.Error, len(done.Result.Citation.Sources))
	}
	if fb := done.Fallback; fb == nil || fb.From != "brave" || fb.Engine != "tavily" || len(fb.Tried) != 1 {
		t.Fatalf("result's fallback %+v", done.Fallback)
	}
	// After the answer, a late redelivery of brave's message republishes the stored
	// result: no engine is called again.
	handle(t, w, req, 3)
	st := r.sim.Stats()
	if st.Requests["brave"] != 1 || st.Requests["tavily"] != 1 {
		t.Errorf("engine calls %v, want brave 1 and tavily 1", st.Requests)
	}
	if got := testutil.ToFloat64(w.Metrics.SearchFallbacks.WithLabelValues("brave", "tavily", "unavailable")); got != 1 {
		t.Errorf("fleet_search_fallbacks_total{brave,tavily,unavailable} = %v, want 1", got)
	}
}

// A call narrowed to Google-backed engines falls back only to a Google-backed engine
// (serper, past brave); the same failure of a call that was not narrowed takes the
// first engine of the list.
func TestFallbackKeepsTheGoogleNarrowing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	settings := map[string]search.Settings{
		"gemini": {Google: true, Fallback: []string{"brave", "serper"}},
		"serper": {Google: true},
	}
	w := r.worker("w1", settings, nil, r.cfgs["gemini"], r.cfgs["brave"], r.cfgs["serper"])
	r.sim.SetFault("/gemini", 503, 0, 0)

	narrowed := r.job("j-google", "gemini")
	narrowed.GooglePreferred = true
	handle(t, w, narrowed, 1)
	if n, fwd := stored[search.Request](t, r.bus, bus.StreamSearch, bus.SubjectSearch("serper")); n != 1 || fwd.Origin != "gemini" {
		t.Fatalf("narrowed call: serper got %d hand-offs (%+v), want 1", n, fwd)
	}
	if n, _ := stored[search.Request](t, r.bus, bus.StreamSearch, bus.SubjectSearch("brave")); n != 0 {
		t.Fatalf("a Google-preferred call fell back to brave")
	}

	handle(t, w, r.job("j-any", "gemini"), 1)
	if n, _ := stored[search.Request](t, r.bus, bus.StreamSearch, bus.SubjectSearch("brave")); n != 1 {
		t.Fatalf("a call that was not narrowed: brave got %d hand-offs, want 1", n)
	}
}

// With no fallback left, the failure ends as an error result, as without fallback,
// and the result still names the engines that failed.
func TestFallbackExhaustedEndsWithTheErrorResult(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", map[string]search.Settings{"brave": {Fallback: []string{"tavily"}}}, nil, r.cfgs["brave"], r.cfgs["tavily"])
	r.sim.SetFault("/brave", 401, 0, 0)
	r.sim.SetFault("/tavily", 401, 0, 0)
	req := r.job("j-exhausted", "brave")
	handle(t, w, req, 1)
	_, fwd := stored[search.Request](t, r.bus, bus.StreamSearch, bus.SubjectSearch("tavily"))
	if len(fwd.Tried) != 1 || fwd.Tried[0].Reason != "auth" {
		t.Fatalf("hand-off %+v", fwd)
	}
	handle(t, w, fwd, 1)
	_, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
	if e := done.Result.Citation.Error; e == nil || e.Type != "SEARCH_AUTH_FAILED" {
		t.Fatalf("result error %+v, want SEARCH_AUTH_FAILED", done.Result.Citation.Error)
	}
	if done.Fallback == nil || done.Fallback.Engine != "tavily" || done.Fallback.Tried[0].Engine != "brave" {
		t.Fatalf("result's fallback %+v", done.Fallback)
	}
}

// lockedBuffer is a log sink shared by goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Two search workers (two processes: each its own key rotation) share the store. A 429
// on brave's first key makes the first worker's search use the second key, and the
// first key rests for both: the second worker, whose rotation starts at the first key
// too, does not send it.
func TestRateLimitedKeyRestsForEveryWorker(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	brave := r.cfgs["brave"]
	brave.APIKey, brave.APIKeys = "", []string{"brave-key-one", "brave-key-two"}
	r.sim.SetKeyFault("/brave", "brave-key-one", 429, time.Minute, 0)
	settings := map[string]search.Settings{}
	w1 := r.worker("w1", settings, nil, brave)
	w2 := r.worker("w2", settings, nil, brave)

	handle(t, w1, r.job("j-key-1", "brave"), 1)
	if got := r.sim.Stats().Requests["brave"]; got != 2 {
		t.Fatalf("first search: %d brave requests, want 2 (the limited key, then the next)", got)
	}
	handle(t, w2, r.job("j-key-2", "brave"), 1)
	if got := r.sim.Stats().Requests["brave"]; got != 3 {
		t.Fatalf("second worker: %d brave requests in all, want 3 (the resting key not sent)", got)
	}
	n, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
	if n != 2 || done.Result.Citation.Error != nil {
		t.Fatalf("%d results, last error %+v", n, done.Result.Citation.Error)
	}
	rests, err := r.store.Searches.Resting(context.Background(), "brave", []string{engines.Fingerprint("brave-key-one"), engines.Fingerprint("brave-key-two")})
	if err != nil || rests[0].Left <= 0 || rests[0].Reason != engines.RateLimited || rests[1].Left != 0 {
		t.Fatalf("rests %+v (%v): want the first key resting for its 429", rests, err)
	}
}

// A key the provider refuses (401) is reported once in all, by its fingerprint, never
// by its value, however many searches and workers meet it.
func TestRefusedKeyIsLoggedOnceRedacted(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	bad, good := "brave-key-REFUSED-1234", "brave-key-good-5678"
	brave := r.cfgs["brave"]
	brave.APIKey, brave.APIKeys = "", []string{bad, good}
	r.sim.SetKeyFault("/brave", bad, 401, 0, 0)
	var logs [2]lockedBuffer
	workers := []*search.Worker{
		r.worker("w1", nil, slog.New(slog.NewTextHandler(&logs[0], nil)), brave),
		r.worker("w2", nil, slog.New(slog.NewTextHandler(&logs[1], nil)), brave),
	}
	for i := range 6 {
		handle(t, workers[i%2], r.job(fmt.Sprintf("j-auth-%d", i), "brave"), 1)
	}
	all := logs[0].String() + logs[1].String()
	if n := strings.Count(all, "API key was refused"); n != 1 {
		t.Fatalf("refused key reported %d times, want once:\n%s", n, all)
	}
	if !strings.Contains(all, engines.Fingerprint(bad)) || !strings.Contains(all, "1 of 2") {
		t.Errorf("the report does not name the key's fingerprint and position:\n%s", all)
	}
	if strings.Contains(all, bad) || strings.Contains(all, good) || strings.Contains(all, "1234") {
		t.Errorf("a key is in the log:\n%s", all)
	}
	if n, _ := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume); n != 6 {
		t.Fatalf("%d results, want 6", n)
	}
	if got := r.sim.Stats().Requests["brave"]; got != 7 {
		t.Errorf("%d brave requests, want 7: the refused key once, then only the good key", got)
	}
}

// A fallback engine whose keys are all cooling down (a 429 a moment ago, seen by any
// worker) is passed over: the call goes to the next engine of the list.
func TestFallbackSkipsARestingEngine(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", map[string]search.Settings{"brave": {Fallback: []string{"tavily", "exa"}}}, nil, r.cfgs["brave"], r.cfgs["tavily"], r.cfgs["exa"])
	if _, err := r.store.Searches.CoolDown(context.Background(), "tavily", engines.Fingerprint(r.cfgs["tavily"].APIKey), engines.RateLimited, time.Minute); err != nil {
		t.Fatal(err)
	}
	r.sim.SetFault("/brave", 503, 0, 0)
	handle(t, w, r.job("j-skip", "brave"), 1)
	if n, _ := stored[search.Request](t, r.bus, bus.StreamSearch, bus.SubjectSearch("tavily")); n != 0 {
		t.Fatal("the call was handed to tavily, which is cooling down")
	}
	n, fwd := stored[search.Request](t, r.bus, bus.StreamSearch, bus.SubjectSearch("exa"))
	if n != 1 || len(fwd.Tried) != 1 || fwd.Tried[0].Engine != "brave" {
		t.Fatalf("exa got %d hand-offs (%+v), want 1 after brave", n, fwd)
	}
	handle(t, w, fwd, 1)
	if _, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume); done.Result.Engine != "exa" || done.Result.Citation.Error != nil {
		t.Fatalf("result from %q, error %+v", done.Result.Engine, done.Result.Citation.Error)
	}
	if got := r.sim.Stats().Requests["tavily"]; got != 0 {
		t.Errorf("tavily was called %d times while resting", got)
	}
}

// The result cache is per tenant. A hit is free and the answer says so
// (searches: 0), so a cache shared across tenants would tell a tenant that someone
// else searched for the same words: tenant B's first search of a query tenant A
// searched is paid and run, and only each tenant's own repeat is a hit.
func TestSearchCacheIsPerTenant(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", map[string]search.Settings{"brave": {CacheTTL: time.Minute}}, nil, r.cfgs["brave"])
	dl := time.Now().Add(time.Minute)
	run := func(job, tenant string) engines.Usage {
		t.Helper()
		if err := r.store.Jobs.CreateJob(context.Background(), &state.Job{ID: job, Tenant: tenant, Kind: "chat", Model: "m", Deadline: dl}); err != nil {
			t.Fatal(err)
		}
		req := search.Request{JobID: job, CallID: "c1", Engine: "brave", Query: engines.Query{Query: "acme merger rumours"}, Deadline: dl}
		handle(t, w, req, 1)
		_, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
		if done.JobID != job {
			t.Fatalf("last resume is for %s, want %s", done.JobID, job)
		}
		return done.Result.Usage
	}
	if u := run("j-cache-a1", "tenant-a"); u.Searches != 1 {
		t.Fatalf("tenant A's first search: usage %+v, want one paid search", u)
	}
	if u := run("j-cache-b1", "tenant-b"); u.Searches != 1 {
		t.Errorf("tenant B's first search of the same query: usage %+v, want one paid search (a free hit shows what A searched)", u)
	}
	if got := r.sim.Stats().Requests["brave"]; got != 2 {
		t.Errorf("brave called %d times for two tenants' first searches, want 2", got)
	}
	if u := run("j-cache-a2", "tenant-a"); u.Searches != 0 {
		t.Errorf("tenant A's repeat: usage %+v, want a cache hit", u)
	}
	if got := r.sim.Stats().Requests["brave"]; got != 2 {
		t.Errorf("brave called %d times after tenant A's repeat, want 2 (served from A's cache)", got)
	}
}

// A chain's search leaves the model's text to the chat worker, so the result it caches
// has none; a direct search (POST /v1/search) answered from that cache still returns
// the text, rendered as the engine would have.
func TestDirectSearchFromAChainsCacheHasTheText(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", map[string]search.Settings{"brave": {CacheTTL: time.Minute}}, nil, r.cfgs["brave"])
	w.Ender = jobs.NewEnder(r.store.Jobs, r.bus, nil, nil)
	ctx := context.Background()
	dl := time.Now().Add(time.Minute)
	q := engines.Query{Query: "acme merger rumours"}
	for _, id := range []string{"j-chain", "j-direct"} {
		if err := r.store.Jobs.CreateJob(ctx, &state.Job{ID: id, Tenant: "t", Kind: "chat", Model: "m", Deadline: dl}); err != nil {
			t.Fatal(err)
		}
	}
	handle(t, w, search.Request{JobID: "j-chain", CallID: "c1", Engine: "brave", Query: q, Deadline: dl}, 1)
	if _, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume); done.JobID != "j-chain" || done.Result.Citation.LLMContent != "" || len(done.Result.Hits) == 0 {
		t.Fatalf("chain's result: job %s, %d hits, text %q", done.JobID, len(done.Result.Hits), done.Result.Citation.LLMContent)
	}
	handle(t, w, search.Request{JobID: "j-direct", CallID: "direct", Engine: "brave", Query: q, Deadline: dl, Direct: true}, 1)
	if got := r.sim.Stats().Requests["brave"]; got != 1 {
		t.Fatalf("brave called %d times, want 1 (the direct search from the cache)", got)
	}
	job, err := r.store.Jobs.GetJob(ctx, "j-direct")
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Result engines.Result `json:"result"`
	}
	if err := json.Unmarshal(job.Response, &resp); err != nil {
		t.Fatalf("direct response %s: %v", job.Response, err)
	}
	want := engines.BuildLLMContent(resp.Result.Query, resp.Result.Summary, resp.Result.Citation.Sources, resp.Result.Hits, nil)
	if resp.Result.Usage.Searches != 0 || !strings.HasPrefix(want, "Web search results for") || resp.Result.Citation.LLMContent != want {
		t.Errorf("direct result from the cache: usage %+v, text:\n%s\nwant:\n%s", resp.Result.Usage, resp.Result.Citation.LLMContent, want)
	}
}

// ledgerWrites counts the store calls that hold or move a search's price.
type ledgerWrites struct {
	search.Store
	mu    sync.Mutex
	pays  int
	moves int
}

func (l *ledgerWrites) ReserveCall(ctx context.Context, jobID, tenant, call string, usd float64, b spend.Budget, now time.Time) (*state.Hold, *spend.Exhausted, error) {
	l.mu.Lock()
	l.pays++
	l.mu.Unlock()
	return l.Store.ReserveCall(ctx, jobID, tenant, call, usd, b, now)
}

func (l *ledgerWrites) SettleCall(ctx context.Context, h *state.Hold, usd float64, searches int) error {
	l.mu.Lock()
	l.moves++
	l.mu.Unlock()
	return l.Store.SettleCall(ctx, h, usd, searches)
}

// A search whose job's deadline passed before a worker took it answers with an error
// result and neither holds the engine's price nor settles one: nothing is searched,
// so the spend ledger is not written at all. One in time holds and settles once.
func TestSearchPastItsDeadlineHoldsNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", nil, nil, r.cfgs["brave"])
	counted := &ledgerWrites{Store: search.StoreOf(r.store)}
	w.Store = counted

	late := r.job("j-late", "brave")
	late.Deadline = time.Now().Add(-time.Second)
	handle(t, w, late, 1)
	_, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
	if done.JobID != "j-late" || done.Result.Citation.Error == nil || !strings.Contains(done.Result.Citation.Error.Message, "deadline") {
		t.Fatalf("late search answered %+v, want the deadline error", done.Result)
	}
	if r.sim.Stats().Requests["brave"] != 0 || counted.pays != 0 || counted.moves != 0 {
		t.Fatalf("late search: %d engine calls, %d holds, %d settles; want none", r.sim.Stats().Requests["brave"], counted.pays, counted.moves)
	}

	handle(t, w, r.job("j-on-time", "brave"), 1)
	if r.sim.Stats().Requests["brave"] != 1 || counted.pays != 1 || counted.moves != 1 {
		t.Fatalf("search in time: %d engine calls, %d holds, %d settles; want one of each", r.sim.Stats().Requests["brave"], counted.pays, counted.moves)
	}
}

// A search its tenant's budget refuses is refused before the engine's shared rate
// limit is asked: it takes no other tenant's turn.
func TestBudgetRefusalTakesNoRateLimitTurn(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", map[string]search.Settings{"brave": {PerSecond: 0.01, Burst: 1}}, nil, r.cfgs["brave"])
	w.Budgets = &spend.Budgets{ByTenant: map[string]spend.Budget{"broke": {SearchesPerDay: 1}}}
	ctx := context.Background()
	req := func(id, tenant string) search.Request {
		dl := time.Now().Add(time.Minute)
		if err := r.store.Jobs.CreateJob(ctx, &state.Job{ID: id, Tenant: tenant, Kind: "chat", Model: "m", Deadline: dl}); err != nil {
			t.Fatal(err)
		}
		return search.Request{JobID: id, CallID: "c1", Engine: "brave", Query: engines.Query{Query: "latest news about NATS JetStream"}, Deadline: dl}
	}
	if _, ex, err := r.store.Ledger.ReserveCall(ctx, "spent", "broke", "earlier@brave", 0.01, spend.Budget{SearchesPerDay: 1}, time.Now()); err != nil || ex != nil {
		t.Fatal(ex, err) // broke's one search of the day
	}
	handle(t, w, req("j-broke", "broke"), 1)
	_, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
	if e := done.Result.Citation.Error; e == nil || e.Type != search.BudgetExhausted {
		t.Fatalf("broke's search answered %+v, want the budget refusal", done.Result.Citation)
	}
	handle(t, w, req("j-rich", "rich"), 1) // fails if broke's refusal took the one token
	if got := r.sim.Stats().Requests["brave"]; got != 1 {
		t.Fatalf("brave called %d times, want 1 (rich's search)", got)
	}
}
