package simulator

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
)

// The simulated research agents: each provider's research agent (pkg/research/agent)
// in its documented shape (internal/fixtures/agents, CONSTRUCTED from the docs),
// mounted under its kind like the engines: OpenAI deep research at
// /openai-deep-research/v1/responses, Gemini Deep Research at
// /gemini-deep-research/v1beta/interactions, Perplexity's Agent API at
// /perplexity-agent/v1/agent, Parallel's Task API at /parallel-task/v1/tasks/runs (its
// Task Groups at /parallel-task/v1/tasks/groups: made, runs added, runs listed) and
// Exa's Agent API at /exa-agent/agent/runs.
//
// A run moves through its provider's statuses over time: queued for
// Options.AgentQueued, running for Options.AgentRunning (its searches and reported
// cost growing as it goes), then completed; tests move the clock with AdvanceAgents
// (POST /_sim/agents/clock {"advance":"30s"}) instead of waiting. The question's
// directives change a run: "sim:agent-drop" records the submission and drops the
// connection without an answer (the client never learns the run's id: a worker dying
// between the provider's accept and its store, as far as the provider can tell), once
// per reference ("sim:agent-drop-chained" only for a chained interaction: Gemini's
// approval of its plan); "sim:agent-fail" fails it, "sim:agent-cost=12.5" sets the
// cost it reports, "sim:agent-time=2m" its running time, "sim:fixture" answers with
// the kind's CONSTRUCTED fixture once completed; "sim:429" and the other fault
// directives apply to the submission. Cancellation is answered as each provider
// does; Gemini with collaborative planning first answers a plan, and a chained
// interaction runs it; Parallel and Exa attribute sources per output field.
// Webhooks go where the provider sends them: OpenAI's and Gemini's to the project's
// endpoint (SetAgentWebhook, the dashboard or WebhookService setting; Gemini's with
// the interaction's webhook_config.user_metadata), Parallel's to the run's webhook
// URL, all signed the Standard Webhooks way. Every submission is counted per fleet
// reference (metadata.fleet_ref, Gemini's user_metadata.fleet_ref, or the question
// where the provider takes none):
// AgentSubmissions, and agentSubmissions in GET /_sim/stats.

// Default run timings (Options.AgentQueued, Options.AgentRunning).
const (
	defaultAgentQueued  = 2 * time.Second
	defaultAgentRunning = 8 * time.Second
)

// agentRun is one simulated provider run.
type agentRun struct {
	kind, id string
	// question is the research question, directives kept; ask is the pages' ask.
	question string
	ask      searchAsk
	effort   string
	model    string
	schema   json.RawMessage
	metadata map[string]string
	// plan marks a Gemini planning interaction; after is the planning interaction
	// an execution chains to ("" none).
	plan  bool
	after string
	// webhook is a Parallel run's webhook URL.
	webhook string

	created   time.Time
	queued    time.Duration
	running   time.Duration
	cancelled time.Time // zero: not cancelled
	fail      bool
	cost      float64 // the cost it reports once done
	fixture   bool
	notified  bool
}

// agentState is a run's state at now: queued, running, completed, failed or
// cancelled, and how far through its running time it is (0…1).
func (r *agentRun) state(now time.Time) (string, float64) {
	if !r.cancelled.IsZero() {
		return "cancelled", r.progress(r.cancelled)
	}
	switch p := r.progress(now); {
	case now.Sub(r.created) < r.queued:
		return "queued", 0
	case p < 1:
		return "running", p
	case r.fail:
		return "failed", 1
	}
	return "completed", 1
}

func (r *agentRun) progress(at time.Time) float64 {
	d := at.Sub(r.created) - r.queued
	if d <= 0 {
		return 0
	}
	if r.running <= 0 {
		return 1
	}
	return math.Min(1, float64(d)/float64(r.running))
}

// pages are the pages the run "reads": made from its question like every simulated
// search.
func (r *agentRun) pages() []simHit { return r.ask.hits(4) }

// seen is how many of the run's pages it has searched at progress p.
func seen(p float64, n int) int { return int(math.Ceil(p * float64(n))) }

type agentHook struct{ url, secret string }

// agentGroup is a Parallel task group: its metadata and its runs' ids, in order.
type agentGroup struct {
	id       string
	metadata map[string]string
	created  time.Time
	runs     []string
}

func (a *agentSim) newGroup(meta map[string]string) *agentGroup {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := &agentGroup{id: a.nextID("tgrp_"), metadata: meta, created: time.Now().Add(a.offset)}
	if len(a.groups) >= maxAgentRuns {
		clear(a.groups)
	}
	a.groups[g.id] = g
	return g
}

// group finds the task group {gid}, answering api's not-found error (nil) when there
// is none.
func (a *agentSim) group(w http.ResponseWriter, r *http.Request, api *agentAPI) *agentGroup {
	a.mu.Lock()
	g := a.groups[r.PathValue("gid")]
	a.mu.Unlock()
	if g == nil {
		api.fail(w, http.StatusNotFound, "Task group "+r.PathValue("gid")+" not found")
	}
	return g
}

// groupRuns are the group's runs the simulator still keeps.
func (a *agentSim) groupRuns(g *agentGroup) []*agentRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*agentRun
	for _, id := range g.runs {
		if r := a.runs[id]; r != nil {
			out = append(out, r)
		}
	}
	return out
}

// groupJSON is a TaskGroupResponse: its id, status counts, creation and metadata.
func (a *agentSim) groupJSON(g *agentGroup) map[string]any {
	now := a.now()
	counts := map[string]int{}
	active := false
	runs := a.groupRuns(g)
	for _, r := range runs {
		st, _ := r.state(now)
		counts[st]++
		active = active || st == "queued" || st == "running"
	}
	meta := g.metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return map[string]any{"taskgroup_id": g.id, "created_at": g.created.UTC().Format(time.RFC3339Nano), "metadata": meta,
		"status": map[string]any{"num_task_runs": len(runs), "task_run_status_counts": counts, "is_active": active,
			"status_message": nil, "modified_at": now.UTC().Format(time.RFC3339Nano)}}
}

// agentSim holds the simulated agents' runs.
type agentSim struct {
	s           *Server
	mu          sync.Mutex
	runs        map[string]*agentRun
	order       []*agentRun
	submissions map[string]int
	dropped     map[string]bool
	offset      time.Duration
	hooks       map[string]agentHook
	groups      map[string]*agentGroup
	seq         int
}

// maxAgentRuns bounds the runs the simulator keeps (the oldest go first).
const maxAgentRuns = 10000

func newAgentSim(s *Server) *agentSim {
	return &agentSim{s: s, runs: map[string]*agentRun{}, submissions: map[string]int{}, dropped: map[string]bool{}, hooks: map[string]agentHook{}, groups: map[string]*agentGroup{}}
}

// nextID is a new run or group id (a.mu held).
func (a *agentSim) nextID(prefix string) string {
	a.seq++
	return fmt.Sprintf("%s%016x", prefix, uint64(a.seq)*0x9e3779b97f4a7c15)
}

func (a *agentSim) now() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Now().Add(a.offset)
}

var (
	agentCostRE = regexp.MustCompile(`sim:agent-cost=([0-9.]+)`)
	agentTimeRE = regexp.MustCompile(`sim:agent-time=([0-9.]+(?:ms|s|m))`)
)

// newRun starts a run of kind for question, counted under key (the fleet reference,
// or the question), in group g when not nil.
func (a *agentSim) newRun(kind, prefix, key, question string, fill func(*agentRun), g *agentGroup) *agentRun {
	queued, running := cmp.Or(a.s.opts.AgentQueued, defaultAgentQueued), cmp.Or(a.s.opts.AgentRunning, defaultAgentRunning)
	if m := agentTimeRE.FindStringSubmatch(question); m != nil {
		running, _ = time.ParseDuration(m[1])
	}
	r := &agentRun{kind: kind, question: question, ask: newAsk(question, 4, nil, nil, ""),
		queued: queued, running: running,
		fail: strings.Contains(question, "sim:agent-fail"), fixture: strings.Contains(question, "sim:fixture")}
	if fill != nil {
		fill(r)
	}
	r.cost = agentCost(kind, r.effort)
	if m := agentCostRE.FindStringSubmatch(question); m != nil {
		r.cost, _ = strconv.ParseFloat(m[1], 64)
	}
	a.mu.Lock()
	r.id = a.nextID(prefix)
	r.created = time.Now().Add(a.offset)
	a.runs[r.id] = r
	a.order = append(a.order, r)
	if len(a.order) > maxAgentRuns {
		delete(a.runs, a.order[0].id)
		a.order = a.order[1:]
	}
	a.submissions[kind+"|"+key]++
	if g != nil {
		g.runs = append(g.runs, r.id)
	}
	a.mu.Unlock()
	// Real time moves too: deliver the end webhook when the run is due.
	time.AfterFunc(r.queued+r.running, a.sweep)
	return r
}

// drop reports whether the answer to run's submission is to be dropped
// ("sim:agent-drop", the first submission under its key only) and, if so, closes the
// connection without answering.
func (a *agentSim) drop(w http.ResponseWriter, r *agentRun, key string) bool {
	switch {
	case !strings.Contains(r.question, "sim:agent-drop"):
		return false
	case strings.Contains(r.question, "sim:agent-drop-chained") && r.after == "":
		return false // only a chained interaction's answer is dropped (Gemini's approval)
	}
	a.mu.Lock()
	first := !a.dropped[r.kind+"|"+key]
	a.dropped[r.kind+"|"+key] = true
	a.mu.Unlock()
	hj, ok := w.(http.Hijacker)
	if !first || !ok {
		return false
	}
	if conn, _, err := hj.Hijack(); err == nil {
		conn.Close()
	}
	return true
}

// agentCost is what a run of kind at effort reports (Gemini and Parallel report no
// cost; OpenAI's is computed by the client from the usage it reports).
func agentCost(kind, effort string) float64 {
	costs := map[string][4]float64{
		"openai-deep-research": {1, 3, 6, 10},
		"perplexity-agent":     {0.05, 0.2, 0.5, 1.2},
		"exa-agent":            {0.1, 0.3, 1, 5},
	}[kind]
	switch effort {
	case "low", "fast", "minimal", "base", "lite":
		return costs[0]
	case "high", "pro":
		return costs[2]
	case "max", "xhigh", "ultra":
		return costs[3]
	}
	return costs[1]
}

func (a *agentSim) get(kind, id string) (*agentRun, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.runs[id]
	if r == nil || r.kind != kind {
		return nil, time.Time{}
	}
	return r, time.Now().Add(a.offset)
}

// cancel cancels a queued or running run; it reports whether the run was still
// going.
func (a *agentSim) cancel(r *agentRun) bool {
	a.mu.Lock()
	now := time.Now().Add(a.offset)
	st, _ := r.state(now)
	going := st == "queued" || st == "running"
	if going {
		r.cancelled = now
	}
	a.mu.Unlock()
	if going {
		a.sweep()
	}
	return going
}

// AdvanceAgents moves the simulated agents' clock forward by d: runs move on as if d
// had passed, and the webhooks of runs that end are sent.
func (s *Server) AdvanceAgents(d time.Duration) {
	s.agents.mu.Lock()
	s.agents.offset += d
	s.agents.mu.Unlock()
	s.agents.sweep()
}

// SetAgentWebhook sets where kind's webhooks go and the secret they are signed with:
// OpenAI's project endpoint (url and a whsec_ secret), Parallel's account secret (url
// empty: each run names its own).
func (s *Server) SetAgentWebhook(kind, url, secret string) {
	s.agents.mu.Lock()
	s.agents.hooks[kind] = agentHook{url: url, secret: secret}
	s.agents.mu.Unlock()
}

// AgentSubmissions is how many runs kind was asked to start under key: the fleet
// reference the submission carried (OpenAI, Gemini, Parallel, Exa), else its
// question (Perplexity, Gemini's chained interactions).
func (s *Server) AgentSubmissions(kind, key string) int {
	s.agents.mu.Lock()
	defer s.agents.mu.Unlock()
	return s.agents.submissions[kind+"|"+key]
}

func (a *agentSim) reset() {
	a.mu.Lock()
	clear(a.runs)
	a.order = nil
	clear(a.submissions)
	clear(a.dropped)
	clear(a.hooks)
	clear(a.groups)
	a.offset = 0
	a.mu.Unlock()
}

func (a *agentSim) submissionCounts() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.submissions)
}

// sweep sends the end webhooks of the runs that have ended and not yet told.
func (a *agentSim) sweep() {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now().Add(a.offset)
	for _, r := range a.order {
		if r.notified {
			continue
		}
		st, _ := r.state(now)
		if st != "completed" && st != "failed" && st != "cancelled" {
			continue
		}
		h := a.hooks[r.kind]
		var body any
		switch r.kind {
		case "openai-deep-research":
			body = map[string]any{"id": "evt_" + r.id, "object": "event", "type": "response." + st, "created_at": now.Unix(), "data": map[string]string{"id": r.id}}
		case "gemini-deep-research":
			body = map[string]any{"type": "interaction." + st, "version": "v1", "timestamp": now.UTC().Format(time.RFC3339),
				"data": map[string]any{"id": r.id, "user_metadata": r.metadata}}
		case "parallel-task":
			h.url = r.webhook // each run names its own
			body = map[string]any{"timestamp": now.UTC().Format(time.RFC3339Nano), "type": "task_run.status", "data": parallelRunJSON(r, st)}
		}
		if body == nil || h.url == "" {
			continue
		}
		r.notified = true
		go deliverAgentWebhook(h.url, h.secret, r.kind, mustJSON(body))
	}
}

// deliverAgentWebhook posts one Standard Webhooks delivery: OpenAI and Gemini key
// the HMAC with the base64 key after whsec_, Parallel with the secret as it is.
func deliverAgentWebhook(url, secret, kind string, body []byte) {
	key := []byte(secret)
	if kind != "parallel-task" {
		key, _ = base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	}
	id := "msg_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// agentAPI is one simulated agent's API as its provider documents it: where its runs
// live (POST creates one, GET {id} reads it, POST {id}/cancel cancels it), how it
// reads a submission, how it shows a run, and its error shape. Each kind states only
// these; the routes around them are one (agentRoutes).
type agentAPI struct {
	kind   string
	prefix string // run ids start with it
	runs   string // the runs' path under the kind: "/v1/responses"
	// created is the status a submission is answered with (200; Parallel 202).
	created int
	// submit reads a submission: the question (fault directives apply to it), the
	// key its submissions are counted under, and what it sets on the new run; or the
	// status and message it is refused with.
	submit func(r *http.Request, body []byte) (agentSubmission, int, string)
	// show is a run as GET {id} answers it at now.
	show func(run *agentRun, now time.Time) any
	// cancelled is the answer to a cancel (going: the run was still going); nil: show.
	cancelled func(run *agentRun, now time.Time, going bool) any
	// fail answers an error in the provider's shape; notFound is its message for an
	// unknown run ("{id}" stands for the id).
	fail     func(w http.ResponseWriter, status int, msg string)
	notFound string
	// more registers the kind's other routes (Parallel's result, Exa's list and events).
	more func(s *Server, api *agentAPI)
}

// agentSubmission is a submission as a kind reads it.
type agentSubmission struct {
	question, key string
	fill          func(*agentRun)
}

// path is the route of the kind's runs with rest after them.
func (api *agentAPI) path(method, rest string) string {
	return method + " /" + api.kind + api.runs + rest
}

// agentRoutes registers the simulated agents and their controls.
func (s *Server) agentRoutes() {
	for _, api := range agentAPIs(s) {
		s.agentAPIRoutes(api)
	}
	s.mux.HandleFunc("POST /_sim/agents/clock", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Advance duration `json:"advance"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `want {"advance":"30s"}`, http.StatusBadRequest)
			return
		}
		s.AdvanceAgents(time.Duration(req.Advance))
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("POST /_sim/agents/webhook", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Kind, URL, Secret string }
		if json.NewDecoder(r.Body).Decode(&req) != nil || req.Kind == "" {
			http.Error(w, `want {"kind":"openai-deep-research","url":"…","secret":"whsec_…"}`, http.StatusBadRequest)
			return
		}
		s.SetAgentWebhook(req.Kind, req.URL, req.Secret)
		w.WriteHeader(http.StatusNoContent)
	})
}

// agentAPIRoutes registers one kind's runs: create, read, cancel, and its others.
func (s *Server) agentAPIRoutes(api *agentAPI) {
	if api.cancelled == nil {
		api.cancelled = func(run *agentRun, now time.Time, _ bool) any { return api.show(run, now) }
	}
	s.mux.HandleFunc(api.path("POST", ""), func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readCounted(w, r, 1<<20, api.kind, r.Method+" "+r.URL.Path)
		if !ok {
			return
		}
		if runs := s.startRuns(w, r, api, nil, []json.RawMessage{body}); runs != nil {
			agentJSON(w, api.created, api.show(runs[0], s.agents.now()))
		}
	})
	s.mux.HandleFunc(api.path("GET", "/{id}"), func(w http.ResponseWriter, r *http.Request) {
		if run, now := s.agentRun(w, r, api); run != nil {
			agentJSON(w, http.StatusOK, api.show(run, now))
		}
	})
	s.mux.HandleFunc(api.path("POST", "/{id}/cancel"), func(w http.ResponseWriter, r *http.Request) {
		run, _ := s.agentRun(w, r, api)
		if run == nil {
			return
		}
		going := s.agents.cancel(run) // cancelling a finished run answers it as it is
		agentJSON(w, http.StatusOK, api.cancelled(run, s.agents.now(), going))
	})
	if api.more != nil {
		api.more(s, api)
	}
}

// startRuns reads each of inputs as a submission of api's and starts its runs (in
// group g, when not nil), the fault directives of the first applying to the request;
// nil when it answered the request itself (a refusal, a fault, a dropped answer).
func (s *Server) startRuns(w http.ResponseWriter, r *http.Request, api *agentAPI, g *agentGroup, inputs []json.RawMessage) []*agentRun {
	var subs []agentSubmission
	for _, in := range inputs {
		sub, status, msg := api.submit(r, in)
		if status != 0 {
			api.fail(w, status, msg)
			return nil
		}
		subs = append(subs, sub)
	}
	if !s.applyFaults(w, r, api.kind, r.URL.Path, subs[0].question, nil, 0) {
		return nil
	}
	var runs []*agentRun
	dropped := false
	for _, sub := range subs {
		run := s.agents.newRun(api.kind, api.prefix, sub.key, sub.question, sub.fill, g)
		runs = append(runs, run)
		dropped = dropped || s.agents.drop(w, run, sub.key)
	}
	if dropped {
		return nil
	}
	return runs
}

// agentRun counts a request about the run {id} and finds the run, answering the
// kind's not-found error (nil) when there is none.
func (s *Server) agentRun(w http.ResponseWriter, r *http.Request, api *agentAPI) (*agentRun, time.Time) {
	s.stats.count(api.kind, nil, r.URL.Path)
	id := r.PathValue("id")
	run, now := s.agents.get(api.kind, id)
	if run == nil {
		api.fail(w, http.StatusNotFound, strings.ReplaceAll(api.notFound, "{id}", id))
	}
	return run, now
}

// agentJSON answers v as JSON with status.
func agentJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// schemaFields are the top-level properties of an output schema with their types,
// in name order.
func schemaFields(schema json.RawMessage) [][2]string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out [][2]string
	for k, p := range s.Properties {
		t, _ := p.Type.(string)
		out = append(out, [2]string{k, t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// fieldValue is a simulated answer for a field of type t, from a page: the page's
// quote for strings, a count for numbers.
func fieldValue(t string, h simHit, i int) any {
	switch t {
	case "number", "integer":
		return 10 * (i + 1)
	case "boolean":
		return true
	case "array":
		return []string{h.Quote}
	case "object":
		return map[string]string{"summary": h.Quote}
	}
	return h.Quote
}

// agentFixture is the kind's CONSTRUCTED fixture, verbatim.
func agentFixture(name string) json.RawMessage {
	return json.RawMessage(fixtures.Read("agents/" + name))
}

// AgentBaseURL is the base URL a research agent of kind takes to reach the simulator
// at base: where the kind is mounted, with /v1 for OpenAI (its SDKs' base).
func AgentBaseURL(base, kind string) string {
	if kind == "openai-deep-research" {
		return base + "/" + kind + "/v1"
	}
	return base + "/" + kind
}
