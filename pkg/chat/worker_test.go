package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The chat worker's unit tests run whole chains on the Redis store over miniredis
// (redistest), a recording publisher and a scripted model server: no NATS, no Redis
// server. The fleet tests (pkg/fleet) run the same chains on the real ones.

// publisher records what the worker publishes.
type publisher struct {
	mu   sync.Mutex
	msgs []published
	// fail, if set, makes publishing on subjects with this prefix fail.
	fail string
}

type published struct {
	subject string
	payload bus.Payload
}

func (p *publisher) add(subject string, pl bus.Payload) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != "" && strings.HasPrefix(subject, p.fail) {
		return errors.New("nats: no responders")
	}
	p.msgs = append(p.msgs, published{subject, pl})
	return nil
}

func (p *publisher) Publish(_ context.Context, subject string, pl bus.Payload) error {
	return p.add(subject, pl)
}

func (p *publisher) PublishAsync(_ context.Context, subject string, pl bus.Payload) (bus.Pending, error) {
	return bus.Pending{}, p.add(subject, pl)
}

func (p *publisher) Emit(subject string, pl bus.Payload) error { return p.add(subject, pl) }

// PublishEvent and TerminalEvent make the publisher the event log of jobs.Ender: like
// the stream, it keeps one terminal event per job and answers a second as a duplicate.
func (p *publisher) PublishEvent(_ context.Context, ev bus.Event) (bool, error) {
	if ev.Type.Terminal() {
		if prev, _ := p.TerminalEvent(context.Background(), ev.JobID); prev != nil {
			return true, nil
		}
	}
	return false, p.add(ev.Subject(), ev)
}

func (p *publisher) TerminalEvent(_ context.Context, jobID string) (*bus.Event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.msgs {
		if e, ok := m.payload.(bus.Event); ok && e.JobID == jobID && e.Type.Terminal() {
			return &e, nil
		}
	}
	return nil, nil
}

// ends returns the terminal events of a job, as "id:type".
func (p *publisher) ends() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.msgs {
		if e, ok := m.payload.(bus.Event); ok && e.Type.Terminal() {
			out = append(out, e.JobID+":"+string(e.Type))
		}
	}
	return out
}

// searches returns the search requests published so far.
func (p *publisher) searches() []search.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []search.Request
	for _, m := range p.msgs {
		if r, ok := m.payload.(search.Request); ok {
			out = append(out, r)
		}
	}
	return out
}

// events returns the types of the job events published so far.
func (p *publisher) events() []bus.EventType {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []bus.EventType
	for _, m := range p.msgs {
		if e, ok := m.payload.(bus.Event); ok {
			out = append(out, e.Type)
		}
	}
	return out
}

func (p *publisher) resumes() []search.Done {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []search.Done
	for _, m := range p.msgs {
		if d, ok := m.payload.(search.Done); ok && strings.HasPrefix(m.subject, bus.SubjectResume+".") {
			out = append(out, d)
		}
	}
	return out
}

// model is a scripted main model: each call takes the next answer.
type model struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	bodies  []string
}

func (m *model) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.bodies)
}

func (m *model) body(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bodies[i]
}

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.bodies = append(m.bodies, string(b))
	var answer func(http.ResponseWriter)
	if len(m.answers) > 0 {
		answer, m.answers = m.answers[0], m.answers[1:]
	}
	m.mu.Unlock()
	if answer == nil {
		http.Error(w, `{"error":{"message":"no answer scripted"}}`, http.StatusInternalServerError)
		return
	}
	answer(w)
}

// say answers with a message.
func say(msg string, finish string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		fmt.Fprintf(w, `{"id":"x","model":"up","choices":[{"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, msg, finish)
	}
}

func text(s string) func(http.ResponseWriter) {
	b, _ := json.Marshal(map[string]any{"role": "assistant", "content": s})
	return say(string(b), "stop")
}

type toolCall struct{ id, name, args string }

func calls(cs ...toolCall) func(http.ResponseWriter) {
	var tcs []map[string]any
	for _, c := range cs {
		tcs = append(tcs, map[string]any{"id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args}})
	}
	b, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs})
	return say(string(b), "tool_calls")
}

func webSearch(id, query string) toolCall {
	b, _ := json.Marshal(map[string]string{"query": query})
	return toolCall{id, intent.ToolName, string(b)}
}

func status(code int, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

type harness struct {
	t      *testing.T
	store  *state.Store
	pub    *publisher
	model  *model
	w      *chat.Worker
	points []string
}

type option func(*chat.Worker, *harness)

func newHarness(t *testing.T, answers []func(http.ResponseWriter), opts ...option) *harness {
	t.Helper()
	return newHarnessOn(t, redistest.Store(t), answers, opts...)
}

// newHarnessOn is newHarness on a given store, which harnesses may share as workers
// share Redis.
func newHarnessOn(t *testing.T, store *state.Store, answers []func(http.ResponseWriter), opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, store: store, pub: &publisher{}, model: &model{answers: answers}}
	srv := httptest.NewServer(h.model)
	t.Cleanup(srv.Close)
	tools, err := intent.NewToolset(intent.Config{Engines: []intent.Engine{{ID: "google", Kind: "gemini"}}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	h.w = &chat.Worker{Bus: h.pub, Store: h.store.Chains,
		Models:     map[string]chat.Model{"m": {Provider: "sim", Client: upstream.New(openaichat.Model, "sim", srv.URL, "", srv.Client(), upstream.Options{}), Upstream: "up"}},
		Tools:      tools,
		Classifier: intent.NewClassifier(),
		MaxHops:    4, MaxSearches: 3, ModelTimeout: 5 * time.Second, LeaseTTL: 200 * time.Millisecond, StickyTTL: time.Hour,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), ID: "w1",
		Ender: jobs.NewEnder(h.store.Jobs, h.pub, nil, slog.New(slog.NewTextHandler(io.Discard, nil))),
		Failpoint: func(name string) {
			mu.Lock()
			defer mu.Unlock()
			h.points = append(h.points, name)
		},
	}
	for _, o := range opts {
		o(h.w, h)
	}
	return h
}

// submit stores a job asking prompt (as a user message), with extra request fields.
func (h *harness) submit(id, prompt string, extra ...string) {
	h.t.Helper()
	msg, _ := json.Marshal(prompt)
	req := `{"model":"m","messages":[{"role":"user","content":` + string(msg) + `}]` + strings.Join(extra, "") + `}`
	h.submitRaw(&state.Job{ID: id, Kind: "chat", Model: "m", Request: storedChat(h.t, req)})
}

// storedChat is a Chat request body as the ingress stores it (wire.EncodeStored).
func storedChat(t testing.TB, body string) json.RawMessage {
	t.Helper()
	req, err := openaichat.Client.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	b, err := wire.EncodeStored(wire.OpenAIChat, req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (h *harness) submitRaw(j *state.Job) {
	h.t.Helper()
	if err := h.store.Jobs.CreateJob(context.Background(), j); err != nil {
		h.t.Fatal(err)
	}
}

func delivery[T bus.Payload](msg T, attempt int) *bus.Delivery[T] {
	d := &bus.Delivery[T]{Msg: msg, Attempt: attempt, MaxDeliver: 5}
	if m, err := bus.Encode("x", msg); err == nil {
		d.Data = m.Data
	}
	return d
}

func (h *harness) job(id string, attempt int) error {
	return handle(h, delivery(bus.ChatJob{JobID: id}, attempt), h.w.HandleJob)
}

func (h *harness) resume(d search.Done, attempt int) error {
	return handle(h, delivery(d, attempt), h.w.HandleResume)
}

// handle runs a handler on a delivery as a consumer would: its outcome is what it
// returned. A panic at a failpoint reaches the test, as a crashing process would.
func handle[T bus.Payload](_ *harness, d *bus.Delivery[T], fn bus.Handler[T]) error {
	return fn(context.Background(), d)
}

// answerSearch plays the search worker for a published request.
func answerSearch(r search.Request, urls ...string) search.Done {
	res := engines.Result{Query: r.Query.Query, Summary: "It is sunny [1].", Usage: engines.Usage{Searches: 1}}
	for _, u := range urls {
		res.Citation.Sources = append(res.Citation.Sources, engines.Source{Web: engines.Web{URI: u, Title: "t " + u}})
	}
	return search.Done{JobID: r.JobID, Hop: r.Hop, CallID: r.CallID, Engine: r.Engine, Result: res}
}

// stored is job id as the store holds it, or nil when there is none.
func (h *harness) stored(id string) *state.Job {
	h.t.Helper()
	j, err := h.store.Jobs.GetJob(context.Background(), id)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

func (h *harness) ended(id string) *state.Job {
	h.t.Helper()
	j := h.stored(id)
	if j == nil || !j.Status.Terminal() {
		h.t.Fatalf("job %s has not ended: %+v", id, j)
	}
	if j.Status == state.Completed {
		// The answer is stored in canonical form; the tests read it as a Chat client
		// does (GET /v1/jobs/{id}).
		if !strings.HasPrefix(string(j.Response), `{"format":2,`) {
			h.t.Fatalf("job %s stored its answer in another form: %s", id, j.Response)
		}
		c := *j
		var err error
		if c.Response, err = openaichat.AnswerJSON(j.Response); err != nil {
			h.t.Fatalf("job %s: %v", id, err)
		}
		return &c
	}
	return j
}

func decide(err error, attempt int) bus.Decision { return bus.Decide(err, attempt, 5) }

func TestFinalAnswerCompletes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){text("Hello.")})
	h.submit("j1", "hi there")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	if j.Status != state.Completed || !strings.Contains(string(j.Response), `"content":"Hello."`) || !strings.Contains(string(j.Response), `"finish_reason":"stop"`) {
		t.Fatalf("job %s: %s", j.Status, j.Response)
	}
	if !strings.Contains(string(j.Usage), `"model_calls":1`) || string(j.Trace) != "null" && string(j.Trace) != "[]" {
		t.Errorf("usage %s trace %s", j.Usage, j.Trace)
	}
	// "hi there" shows no search intent: the selective policy offers no web_search.
	if strings.Contains(h.model.body(0), intent.ToolName) {
		t.Error("web_search offered without intent")
	}
	if got := h.pub.events(); len(got) != 2 || got[0] != bus.EventModelCall || got[1] != bus.EventCompleted {
		t.Errorf("events %v", got)
	}
	if ends := h.pub.ends(); len(ends) != 1 || ends[0] != "j1:completed" {
		t.Errorf("terminal events %v", ends)
	}
	// A redelivered job message finds the job ended: no model call, no hook.
	if err := h.job("j1", 2); err != nil || h.model.calls() != 1 || len(h.pub.ends()) != 1 {
		t.Fatalf("replay: err %v, %d model calls, terminal events %v", err, h.model.calls(), h.pub.ends())
	}
}

// One search, then the answer: the whole chain, with every replay a redelivery can
// make along the way.
func TestSearchChain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){
		calls(webSearch("c1", "weather in Paris")),
		text("Sunny [1]."),
	})
	h.submit("j1", "Search the web: weather in Paris today?")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.model.body(0), intent.ToolName) {
		t.Fatal("web_search not offered to a search request")
	}
	reqs := h.pub.searches()
	if len(reqs) != 1 || reqs[0].Engine != "google" || reqs[0].Query.Query != "weather in Paris" || reqs[0].Hop != 0 || reqs[0].CallID != "c1" {
		t.Fatalf("searches %+v", reqs)
	}
	if j := h.stored("j1"); j.Status != state.Running {
		t.Fatalf("status %q while searching", j.Status)
	}
	if got := h.points; strings.Join(got, ",") != "chat.after_model_call,chat.after_turn_stored,chat.after_dispatch" {
		t.Fatalf("failpoints %v", got)
	}
	// A redelivered job message dispatches the stored calls again (the stream drops
	// the duplicate), without a model call and without counting the search twice.
	if err := h.job("j1", 2); err != nil {
		t.Fatal(err)
	}
	st, _ := h.store.Chains.LoadStep(context.Background(), "j1", nil)
	if h.model.calls() != 1 || len(h.pub.searches()) != 2 || st.Chain.Searches != 1 {
		t.Fatalf("replay: %d model calls, %d searches published, %d counted", h.model.calls(), len(h.pub.searches()), st.Chain.Searches)
	}
	done := answerSearch(reqs[0], "https://weather.example/paris")
	if err := h.resume(done, 1); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	if j.Status != state.Completed || h.model.calls() != 2 {
		t.Fatalf("status %s after %d model calls", j.Status, h.model.calls())
	}
	// Hop 1 read the search result, numbered in the chain's sequence.
	if b := h.model.body(1); !strings.Contains(b, `"tool_call_id":"c1"`) || !strings.Contains(b, "It is sunny [1].") {
		t.Fatalf("hop 1 request lacks the result: %s", b)
	}
	if r := string(j.Response); !strings.Contains(r, `"url":"https://weather.example/paris"`) || !strings.Contains(r, `"searches":1`) || !strings.Contains(r, `"hops":2`) {
		t.Fatalf("response %s", r)
	}
	if !strings.Contains(string(j.Trace), `"query":"weather in Paris"`) || !strings.Contains(string(j.Usage), `"model_calls":2`) {
		t.Fatalf("trace %s usage %s", j.Trace, j.Usage)
	}
	// A redelivered result changes nothing.
	if err := h.resume(done, 2); err != nil || h.model.calls() != 2 || len(h.pub.ends()) != 1 {
		t.Fatalf("replayed result: err %v, %d model calls, terminal events %v", err, h.model.calls(), h.pub.ends())
	}
}

// twoSearches runs hop 0 of job j1, whose model asks for two searches (a, then b),
// and returns the search requests published; the next hop's model answers.
func twoSearches(t *testing.T) (*harness, []search.Request) {
	t.Helper()
	h := newHarness(t, []func(http.ResponseWriter){
		calls(webSearch("a", "one"), webSearch("b", "two")),
		text("Both [1] [2]."),
	})
	h.submit("j1", "Search the web for one and two")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	reqs := h.pub.searches()
	if len(reqs) != 2 {
		t.Fatalf("searches %+v", reqs)
	}
	return h, reqs
}

// Two searches of one hop: the first result waits, the second runs the next hop;
// a result whose hop was never dispatched is dead-lettered.
func TestParallelResults(t *testing.T) {
	t.Parallel()
	h, reqs := twoSearches(t)
	if err := h.resume(answerSearch(reqs[0], "https://a.example/"), 1); err != nil || h.model.calls() != 1 {
		t.Fatalf("first result: err %v, %d model calls", err, h.model.calls())
	}
	if err := h.resume(answerSearch(reqs[1], "https://b.example/"), 1); err != nil || h.model.calls() != 2 {
		t.Fatalf("second result: err %v, %d model calls", err, h.model.calls())
	}
	if j := h.ended("j1"); !strings.Contains(string(j.Response), "https://b.example/") {
		t.Fatalf("response %s", j.Response)
	}
	h.submit("j2", "hello")
	err := h.resume(search.Done{JobID: "j2", Hop: 0, CallID: "x"}, 1)
	if d := decide(err, 1); d.Action != bus.TermDLQ {
		t.Fatalf("result for an undispatched hop: %v → %+v", err, d)
	}
	// A message for a job the store does not know (Redis lost it) is an orphan:
	// dead-lettered at once with its reason, and nothing is paid for it.
	calls := h.model.calls()
	for _, err := range []error{h.resume(search.Done{JobID: "gone", Hop: 0, CallID: "x"}, 1), h.job("gone", 1)} {
		if d := decide(err, 1); d.Action != bus.TermDLQ || !errors.Is(err, jobs.ErrUnknownJob) {
			t.Fatalf("orphan: %v → %+v", err, d)
		}
	}
	if h.model.calls() != calls {
		t.Fatalf("%d model calls, %d before: an orphan was paid for", h.model.calls(), calls)
	}
}

// Results the search workers stored before either resume came (SaveSearchResult): the
// resume of the one stored first, though it finds both in, waits, with no retry; the
// one stored last runs the next hop, whichever resume comes first.
func TestResultsStoredBeforeTheirResumes(t *testing.T) {
	t.Parallel()
	for _, lastFirst := range []bool{false, true} {
		h, reqs := twoSearches(t)
		first, last := answerSearch(reqs[1], "https://b.example/"), answerSearch(reqs[0], "https://a.example/")
		for _, d := range []search.Done{first, last} {
			if err := h.store.Searches.SaveSearchResult(context.Background(), "j1", d.Hop, d.CallID, delivery(d, 1).Data, nil); err != nil {
				t.Fatal(err)
			}
		}
		order := []search.Done{first, last}
		if lastFirst {
			order = []search.Done{last, first}
		}
		for i, d := range order {
			err := h.resume(d, 1)
			wantCalls := 1
			if d.CallID == last.CallID || i == 1 {
				wantCalls = 2
			}
			if err != nil || h.model.calls() != wantCalls {
				t.Fatalf("last first %v: resume of %s: err %v, %d model calls, want %d", lastFirst, d.CallID, err, h.model.calls(), wantCalls)
			}
		}
		if j := h.ended("j1"); !strings.Contains(string(j.Response), "https://a.example/") || !strings.Contains(string(j.Response), "https://b.example/") {
			t.Fatalf("last first %v: response %s", lastFirst, j.Response)
		}
	}
}

// Calls the fleet answers without a search (bad arguments, the search limit) are
// recorded at dispatch; when no search is left, the next hop runs at once.
func TestLocalResults(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){
		calls(toolCall{"bad", intent.ToolName, `{"query":`}),
		calls(webSearch("s1", "one"), webSearch("s2", "two")),
		text("Done [1]."),
	}, func(w *chat.Worker, _ *harness) { w.MaxSearches = 1 })
	h.submit("j1", "Search the web: what happened today?")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	// Hop 0's only call was rejected locally: hop 1 ran in the same step.
	if h.model.calls() != 2 || !strings.Contains(h.model.body(1), `"tool_call_id":"bad"`) {
		t.Fatalf("%d model calls; hop 1 body %s", h.model.calls(), h.model.body(min(1, h.model.calls()-1)))
	}
	reqs := h.pub.searches()
	if len(reqs) != 1 || reqs[0].CallID != "s1" || reqs[0].Hop != 1 {
		t.Fatalf("searches %+v (the limit allows one)", reqs)
	}
	if err := h.resume(answerSearch(reqs[0], "https://one.example/"), 1); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	if !strings.Contains(h.model.body(2), "The search limit for this request is reached.") || !strings.Contains(string(j.Response), `"searches":1`) {
		t.Fatalf("hop 2 body %s; response %s", h.model.body(2), j.Response)
	}
}

// A search the budget refused is no search in the answer: searchfleet.searches,
// usage.searchfleet.searches and the job's usage all count only the one that ran.
func TestRefusedSearchesNotCounted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){
		calls(webSearch("a", "one"), webSearch("b", "two")),
		text("One [1]."),
	})
	h.submit("j1", "Search the web for one and two")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	reqs := h.pub.searches()
	if len(reqs) != 2 {
		t.Fatalf("searches %+v", reqs)
	}
	refused := search.Done{JobID: reqs[1].JobID, Hop: reqs[1].Hop, CallID: reqs[1].CallID, Engine: reqs[1].Engine,
		Result: *engines.InvalidArgumentsResult(search.BudgetExhausted, "The daily spending budget is used up.", reqs[1].Query.Query)}
	for _, d := range []search.Done{answerSearch(reqs[0], "https://a.example/"), refused} {
		if err := h.resume(d, 1); err != nil {
			t.Fatal(err)
		}
	}
	j := h.ended("j1")
	var resp struct {
		Usage struct {
			Searchfleet struct {
				Searches int `json:"searches"`
			} `json:"searchfleet"`
		} `json:"usage"`
		Searchfleet struct {
			Searches int `json:"searches"`
		} `json:"searchfleet"`
	}
	var usage struct {
		Searches int `json:"searches"`
	}
	if err := json.Unmarshal(j.Response, &resp); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j.Usage, &usage); err != nil {
		t.Fatal(err)
	}
	if resp.Searchfleet.Searches != 1 || resp.Usage.Searchfleet.Searches != 1 || usage.Searches != 1 {
		t.Errorf("searches: searchfleet %d, usage.searchfleet %d, job usage %d; want 1 each (one ran, one was refused)",
			resp.Searchfleet.Searches, resp.Usage.Searchfleet.Searches, usage.Searches)
	}
}

// Client tool calls end the job with finish_reason tool_calls; the conversation stays
// sticky, so the client's next request (with the tool results) is offered web_search
// although it shows no search intent.
func TestClientToolCallsKeepTheChainSticky(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){
		calls(webSearch("s1", "forecast")),
		calls(toolCall{"k1", "get_time", `{}`}, webSearch("s2", "dropped")),
		text("It is noon."),
	})
	tools := `,"tools":[{"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}]`
	h.submit("j1", "Search the web: forecast?", tools)
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	if err := h.resume(answerSearch(h.pub.searches()[0], "https://f.example/"), 1); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	if !strings.Contains(string(j.Response), `"finish_reason":"tool_calls"`) || !strings.Contains(string(j.Response), "get_time") || strings.Contains(string(j.Response), "dropped") {
		t.Fatalf("response %s", j.Response)
	}
	var resp struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	json.Unmarshal(j.Response, &resp)
	// The client's next request: its conversation, the answer, its tool's result.
	var shown map[string]any
	json.Unmarshal(resp.Choices[0].Message, &shown)
	delete(shown, "annotations")
	next, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
		map[string]string{"role": "user", "content": "Search the web: forecast?"},
		shown,
		map[string]string{"role": "tool", "tool_call_id": "k1", "content": "12:00"},
	}})
	h.submitRaw(&state.Job{ID: "j2", Kind: "chat", Model: "m", Request: storedChat(t, string(next))})
	if err := h.job("j2", 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.model.body(2), intent.ToolName) {
		t.Fatal("the continued conversation was not offered web_search")
	}
	if j := h.ended("j2"); j.Status != state.Completed {
		t.Fatalf("j2 %s", j.Status)
	}
}

// Model failures: a retryable one is retried (the hop's lease freed at once) until
// the last delivery, which fails the job visibly; one no retry can fix fails it at
// once with the provider's own status.
func TestModelFailures(t *testing.T) {
	t.Parallel()
	unavailable := status(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`)
	h := newHarness(t, []func(http.ResponseWriter){unavailable, unavailable,
		status(http.StatusBadRequest, `{"error":{"message":"context too long","type":"invalid_request_error","code":"context_length_exceeded"}}`)})
	h.submit("j1", "hi")
	err := h.job("j1", 1)
	if d := decide(err, 1); d.Action != bus.Nak || d.Delay <= 0 {
		t.Fatalf("retryable failure: %v → %+v", err, d)
	}
	// The lease was dropped: another worker may take the retry at once.
	if st, _ := h.store.Chains.LoadStep(context.Background(), "j1", &state.Claim{Hop: 0, Owner: "w2", TTL: time.Second}); !st.Claimed {
		t.Fatal("the failed step kept the hop's lease")
	}
	h.store.Chains.LoadStep(context.Background(), "j1", &state.Claim{Hop: 0, Owner: "w1", TTL: time.Millisecond})
	time.Sleep(5 * time.Millisecond)
	// Wait for w2's claim to lapse, then fail on the last delivery.
	time.Sleep(time.Second)
	if err := h.job("j1", 5); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	if j.Status != state.Failed || j.Error == nil || j.Error.Status != http.StatusBadGateway || j.Error.Type != "upstream_error" {
		t.Fatalf("job %s error %+v", j.Status, j.Error)
	}
	if got := h.pub.events(); got[len(got)-1] != bus.EventFailed {
		t.Fatalf("events %v", got)
	}
	h.submit("j2", "hi")
	if err := h.job("j2", 1); err != nil {
		t.Fatal(err)
	}
	if j := h.ended("j2"); j.Error == nil || j.Error.Status != http.StatusBadRequest || j.Error.Code != "context_length_exceeded" {
		t.Fatalf("refused request: %+v", j.Error)
	}
}

func TestModelTimeout(t *testing.T) {
	t.Parallel()
	slow := func(w http.ResponseWriter) { time.Sleep(300 * time.Millisecond); text("late")(w) }
	h := newHarness(t, []func(http.ResponseWriter){slow, slow}, func(w *chat.Worker, _ *harness) { w.ModelTimeout = 50 * time.Millisecond })
	h.submit("j1", "hi")
	if d := decide(h.job("j1", 1), 1); d.Action != bus.Nak {
		t.Fatalf("timeout on an early delivery → %+v", d)
	}
	if err := h.job("j1", 5); err != nil {
		t.Fatal(err)
	}
	if j := h.ended("j1"); j.Error == nil || j.Error.Status != http.StatusGatewayTimeout {
		t.Fatalf("error %+v", j.Error)
	}
}

// A step whose model call never answers is not held for ever: past the model's
// timeout the step ends with an error the consumer retries, and the hop's lease is
// no longer kept, so the retry, on another worker, finds the hop free.
func TestModelThatNeverAnswersIsRetried(t *testing.T) {
	t.Parallel()
	never := make(chan struct{})
	lost := func(http.ResponseWriter) { <-never }
	h := newHarness(t, []func(http.ResponseWriter){lost, text("Hello.")}, func(w *chat.Worker, _ *harness) { w.ModelTimeout = 300 * time.Millisecond })
	t.Cleanup(func() { close(never) }) // before the model's server closes: it waits for the call
	h.submit("j1", "hi")
	start := time.Now()
	err := h.job("j1", 1)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("given up after %s, before the model's timeout", waited)
	}
	if d := decide(err, 1); d.Action != bus.Nak {
		t.Fatalf("%v → %+v; want a retry", err, d)
	}
	h.w.ModelTimeout, h.w.ID = 5*time.Second, "w2"
	if err := h.job("j1", 2); err != nil {
		t.Fatalf("the retry: %v (the given-up step kept its hop?)", err)
	}
	if j := h.ended("j1"); !strings.Contains(string(j.Response), "Hello.") {
		t.Fatalf("response %s", j.Response)
	}
}

func TestShutdownLeavesTheStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){func(w http.ResponseWriter) { time.Sleep(200 * time.Millisecond); text("x")(w) }})
	h.submit("j1", "hi")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := h.w.HandleJob(ctx, delivery(bus.ChatJob{JobID: "j1"}, 1))
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && decide(err, 1).Action != bus.Nak {
		t.Fatalf("err %v", err)
	}
	if j := h.stored("j1"); j.Status.Terminal() {
		t.Fatalf("a shutdown ended the job: %s", j.Status)
	}
}

// Another worker holds the hop: look again after its lease.
func TestLeaseHeldElsewhere(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.submit("j1", "hi")
	h.store.Chains.LoadStep(context.Background(), "j1", &state.Claim{Hop: 0, Owner: "other", TTL: time.Second})
	err := h.job("j1", 1)
	if d := decide(err, 1); d.Action != bus.Nak || d.Delay <= 900*time.Millisecond || d.Delay > time.Second+bus.LeaseMargin {
		t.Fatalf("%v → %+v", err, d)
	}
	if h.model.calls() != 0 {
		t.Fatal("the model was called under another worker's lease")
	}
}

// Jobs that cannot go on end visibly, each with its error.
func TestFailures(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.submitRaw(&state.Job{ID: "late", Kind: "chat", Model: "m", Request: storedChat(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`), Deadline: time.Now().Add(-time.Second)})
	h.submitRaw(&state.Job{ID: "nomodel", Kind: "chat", Model: "x", Request: storedChat(t, `{"model":"x","messages":[{"role":"user","content":"hi"}]}`)})
	h.submitRaw(&state.Job{ID: "broken", Kind: "chat", Model: "m", Request: json.RawMessage(`[1]`)})
	h.submit("garbled", "hi")
	h.store.Chains.SaveTurn(context.Background(), "garbled", 0, []byte(`{"parts":"not parts"}`), false, false)
	for id, want := range map[string]string{"late": "job_deadline_exceeded", "nomodel": "model_not_found", "broken": "server_error", "garbled": "upstream_error"} {
		if err := h.job(id, 1); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		j := h.ended(id)
		if j.Status != state.Failed || j.Error == nil || (j.Error.Code != want && j.Error.Type != want) {
			t.Errorf("%s: %s %+v, want %s", id, j.Status, j.Error, want)
		}
	}
	if h.model.calls() != 0 {
		t.Fatalf("%d model calls for jobs that cannot run", h.model.calls())
	}
}

// A cancel that arrives while the model thinks stops the searches.
func TestCancelledWhileThinking(t *testing.T) {
	t.Parallel()
	var h *harness
	h = newHarness(t, []func(http.ResponseWriter){func(w http.ResponseWriter) {
		h.store.Jobs.Finish(context.Background(), "j1", state.Cancelled)
		calls(webSearch("c1", "x"))(w)
	}})
	h.submit("j1", "Search the web: x")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.searches()) != 0 || h.stored("j1").Status != state.Cancelled || len(h.pub.ends()) != 0 {
		t.Fatalf("searches %v, status %s, terminal events %v", h.pub.searches(), h.stored("j1").Status, h.pub.ends())
	}
}

// The crash points the end-to-end tests kill a worker at: a second worker takes the
// redelivered step, and only a crash before the answer is stored repeats a model call.
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		point      string
		modelCalls int
	}{
		{"chat.after_model_call", 3},
		{"chat.after_turn_stored", 2},
		{"chat.after_dispatch", 2},
	} {
		answers := []func(http.ResponseWriter){calls(webSearch("c1", "weather")), text("Sunny [1].")}
		if c.modelCalls == 3 {
			// The first answer is lost with the worker that got it.
			answers = append([]func(http.ResponseWriter){calls(webSearch("c1", "weather"))}, answers...)
		}
		t.Run(c.point, func(t *testing.T) {
			t.Parallel()
			type crash struct{}
			h := newHarness(t, answers, func(w *chat.Worker, h *harness) {
				w.Failpoint = func(name string) {
					if name == c.point {
						panic(crash{})
					}
				}
			})
			h.submit("j1", "Search the web: weather?")
			func() {
				defer func() {
					if r := recover(); r != (crash{}) {
						t.Fatalf("no crash at %s: %v", c.point, r)
					}
				}()
				h.job("j1", 1)
			}()
			// The next worker, on the redelivery.
			h.w.Failpoint, h.w.ID = nil, "w2"
			var err error
			for attempt := 2; ; attempt++ {
				if err = h.job("j1", 2); err == nil || attempt > 20 {
					break
				}
				// The dead worker's lease holds the hop until it lapses.
				if d := decide(err, 2); d.Action != bus.Nak {
					t.Fatalf("attempt %d: %v → %+v", attempt, err, d)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			reqs := h.pub.searches()
			if len(reqs) == 0 {
				t.Fatal("no search published")
			}
			if err := h.resume(answerSearch(reqs[len(reqs)-1], "https://w.example/"), 1); err != nil {
				t.Fatal(err)
			}
			st, _ := h.store.Chains.LoadStep(context.Background(), "j1", nil)
			if j := h.ended("j1"); j.Status != state.Completed || h.model.calls() != c.modelCalls || st.Chain.Searches != 1 {
				t.Fatalf("status %s, %d model calls (want %d), %d searches counted", j.Status, h.model.calls(), c.modelCalls, st.Chain.Searches)
			}
		})
	}
}

// A terminal event that cannot be published makes the step retry; the retry calls no
// model, and the job's deadline stays set until the event is out (so the reaper
// publishes it if no retry does).
func TestEndingEventFailsRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){text("ok")})
	h.submitRaw(&state.Job{ID: "j1", Kind: "chat", Model: "m", Deadline: time.Now().Add(time.Minute),
		Request: storedChat(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)})
	h.pub.fail = "fleet.events.v2.j1.end"
	if err := h.job("j1", 1); err == nil {
		t.Fatal("a step whose terminal event failed was acked")
	}
	if ids, _ := h.store.Jobs.Overdue(context.Background(), time.Now().Add(time.Hour), 10); len(ids) != 1 {
		t.Fatalf("deadline dropped before the terminal event was out: %v", ids)
	}
	h.pub.fail = ""
	if err := h.w.FailJob(context.Background(), "j1", jobs.DeadlineExceeded()); err != nil {
		t.Fatal(err)
	}
	if h.model.calls() != 1 || h.stored("j1").Status != state.Completed {
		t.Fatalf("%d model calls, status %s", h.model.calls(), h.stored("j1").Status)
	}
	if ends := h.pub.ends(); len(ends) != 1 || ends[0] != "j1:completed" {
		t.Fatalf("terminal events %v: the replayed ending must publish the first one", ends)
	}
}

func TestPublishFailureRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){calls(webSearch("c1", "x"))})
	h.pub.fail = "fleet.search."
	h.submit("j1", "Search the web: x")
	if err := h.job("j1", 1); err == nil {
		t.Fatal("a search that could not be published was acked")
	}
	h.pub.fail = ""
	if err := h.job("j1", 2); err != nil || len(h.pub.searches()) != 1 || h.model.calls() != 1 {
		t.Fatalf("retry: %v, searches %d, model calls %d", err, len(h.pub.searches()), h.model.calls())
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	dl := func(p bus.Payload) *bus.Delivery[bus.DeadLetter] {
		m, _ := bus.Encode("x", p)
		return &bus.Delivery[bus.DeadLetter]{Msg: bus.DeadLetter{MsgKind: p.Kind(), Data: m.Data, Consumer: "c", Deliveries: 5, Reason: "boom"}}
	}
	ctx := context.Background()
	h.submit("j1", "hi")
	h.submit("j2", "hi")
	h.submit("j3", "hi")
	for _, d := range []*bus.Delivery[bus.DeadLetter]{
		dl(bus.ChatJob{JobID: "j1"}),
		dl(search.Done{JobID: "j2", Hop: 0, CallID: "c"}),
		dl(search.Request{JobID: "j3", Direct: true, Engine: "google"}),
		dl(search.Request{JobID: "j9", Hop: 1, CallID: "c9", Engine: "google", Query: engines.Query{Query: "q"}}),
		dl(bus.WebhookDelivery{ID: "wh"}),
		{Msg: bus.DeadLetter{MsgKind: bus.ChatJob{}.Kind(), Data: []byte("garbage")}},
		{Msg: bus.DeadLetter{MsgKind: "unknown.v1"}},
	} {
		if err := h.w.HandleDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"j1", "j2", "j3"} {
		if j := h.ended(id); j.Status != state.Failed || j.Error.Code != "dead_letter" {
			t.Errorf("%s: %s %+v", id, j.Status, j.Error)
		}
	}
	// A dead search becomes an error result the model reads.
	rs := h.pub.resumes()
	if len(rs) != 1 || rs[0].JobID != "j9" || rs[0].CallID != "c9" || rs[0].Result.Citation.Error == nil || rs[0].Attempts != 5 {
		t.Fatalf("resumes %+v", rs)
	}
	// Failing from outside twice leaves one ending.
	if err := h.w.FailJob(ctx, "j1", &state.JobError{Type: "x", Message: "again"}); err != nil {
		t.Fatal(err)
	}
	if j := h.stored("j1"); j.Error.Code != "dead_letter" {
		t.Fatalf("second failure overwrote the first: %+v", j.Error)
	}
}

func TestExitAt(t *testing.T) {
	t.Parallel()
	if chat.ExitAt("") != nil {
		t.Fatal("no failpoint set, but a Failpoint made")
	}
	fp := chat.ExitAt("chat.after_dispatch")
	fp("chat.after_model_call") // another point: returns
}

// A request that declares search is offered the tool whatever the intent rules say,
// and its own settings shape the searches: max_uses narrows the limit, its domains and
// hits per search apply to every query.
func TestRequestSearchSettings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){calls(webSearch("c1", "x"), webSearch("c2", "y")), text("done")})
	h.submit("j1", "hello there", `,"tools":[{"type":"web_search","max_uses":1,"allowed_domains":["go.dev"],"max_results":3}]`)
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.model.body(0), `"name":"web_search"`) {
		t.Fatalf("web_search not offered to a request that declared it: %s", h.model.body(0))
	}
	reqs := h.pub.searches()
	if len(reqs) != 1 {
		t.Fatalf("%d searches published, want 1 (max_uses 1)", len(reqs))
	}
	if q := reqs[0].Query; len(q.AllowedDomains) != 1 || q.AllowedDomains[0] != "go.dev" || q.Count != 3 {
		t.Fatalf("query %+v, want the request's domains and count", q)
	}
	// Without a declaration, the same greeting is not offered the tool.
	h2 := newHarness(t, []func(http.ResponseWriter){text("hi")})
	h2.submit("j2", "hello there")
	if err := h2.job("j2", 1); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h2.model.body(0), `"name":"web_search"`) {
		t.Fatal("web_search offered without intent or a declaration")
	}
}

// A model that cannot be reached fails the job (on its last delivery) with a stable
// message: the provider's address and the transport's words stay in the log.
func TestUnreachableModelLeaksNoAddress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(w *chat.Worker, _ *harness) {
		w.Models = map[string]chat.Model{"m": {Provider: "sim", Client: upstream.New(openaichat.Model, "sim", "http://127.0.0.1:1", "", http.DefaultClient, upstream.Options{}), Upstream: "up"}}
	})
	h.submit("j1", "hi")
	if err := h.job("j1", 5); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	if j.Status != state.Failed || j.Error == nil || j.Error.Type != "upstream_error" {
		t.Fatalf("job %s %+v", j.Status, j.Error)
	}
	for _, leak := range []string{"127.0.0.1", "dial", "connect", "http://"} {
		if strings.Contains(j.Error.Message, leak) {
			t.Fatalf("client-visible error %q contains %q", j.Error.Message, leak)
		}
	}
}
