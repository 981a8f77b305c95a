package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/research/agent"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// The agents are tested against the simulator over HTTP: it plays each provider's
// documented shapes (internal/fixtures/agents), and its clock is moved instead of
// waited on.

func newSim(t *testing.T) (*simulator.Server, string) {
	t.Helper()
	sim := simulator.New(simulator.Options{AgentQueued: 2 * time.Second, AgentRunning: 20 * time.Second})
	hs := httptest.NewServer(sim)
	t.Cleanup(hs.Close)
	return sim, hs.URL
}

// baseFor is where the simulator serves kind, as the agent's base URL.
func baseFor(sim, kind string) string {
	if kind == agent.KindOpenAI {
		return sim + "/" + kind + "/v1"
	}
	return sim + "/" + kind
}

func newAgent(t *testing.T, url, kind string, keys ...string) agent.Agent {
	t.Helper()
	if len(keys) == 0 {
		keys = []string{"sim-key"}
	}
	a, err := agent.New(kind, baseFor(url, kind), keys, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// submissionKey is what the simulator counts a kind's submissions under: the fleet
// reference where the provider keeps one, else the question.
func submissionKey(kind string, req agent.Request) string {
	if kind == agent.KindPerplexity {
		return req.Input
	}
	return req.Ref
}

// run polls id, moving the simulator's clock 5 s between polls, until the run ends
// or waits for its plan; it returns the last status and every event seen.
func run(t *testing.T, sim *simulator.Server, a agent.Agent, id string) (agent.Status, []agent.Event, []agent.State) {
	t.Helper()
	ctx := context.Background()
	cursor := ""
	var events []agent.Event
	var states []agent.State
	for range 40 {
		st, err := a.Poll(ctx, id, cursor)
		if err != nil {
			t.Fatalf("poll %s: %v", id, err)
		}
		events = append(events, st.Events...)
		cursor = st.Cursor
		if len(states) == 0 || states[len(states)-1] != st.State {
			states = append(states, st.State)
		}
		if st.State.Done() || st.State == agent.RequiresPlan {
			return st, events, states
		}
		sim.AdvanceAgents(5 * time.Second)
	}
	t.Fatalf("run %s never ended", id)
	return agent.Status{}, nil, nil
}

var markerRE = regexp.MustCompile(`\[(\d+)\]`)

// checkReport asserts the report cites with [n] markers, every marker names a
// source, and every source is cited.
func checkReport(t *testing.T, res *agent.Result) {
	t.Helper()
	if res == nil {
		t.Fatal("completed without a result")
	}
	if len(res.Sources) == 0 {
		t.Fatalf("no sources; report %q", res.Report)
	}
	cited := map[int]bool{}
	for _, m := range markerRE.FindAllStringSubmatch(res.Report, -1) {
		n, _ := strconv.Atoi(m[1])
		if n < 1 || n > len(res.Sources) {
			t.Fatalf("marker [%d] outside the %d sources: %q", n, len(res.Sources), res.Report)
		}
		cited[n] = true
	}
	for i, s := range res.Sources {
		if !cited[i+1] {
			t.Errorf("source %d (%s) is never cited in %q", i+1, s.URL, res.Report)
		}
		if !strings.HasPrefix(s.URL, "https://") {
			t.Errorf("source %d has URL %q", i+1, s.URL)
		}
	}
}

func TestAgentsRunToCompletion(t *testing.T) {
	for _, kind := range agent.Kinds {
		t.Run(kind, func(t *testing.T) {
			sim, url := newSim(t)
			a := newAgent(t, url, kind)
			req := agent.Request{Ref: "rr_complete_" + kind, Input: "How deep is Lake Constance", Effort: "medium"}
			id, err := a.Submit(context.Background(), req)
			if err != nil || id == "" {
				t.Fatalf("submit: %q %v", id, err)
			}
			st, events, states := run(t, sim, a, id)
			if st.State != agent.Completed {
				t.Fatalf("state %s (%s)", st.State, st.Error)
			}
			if want := []agent.State{agent.Queued, agent.Running, agent.Completed}; !slices.Equal(states, want) {
				t.Errorf("states %v, want %v", states, want)
			}
			checkReport(t, st.Result)
			if kind != agent.KindParallel && kind != agent.KindExa {
				if !slices.ContainsFunc(events, func(e agent.Event) bool { return e.Type == "search" && e.Text != "" }) {
					t.Errorf("no search events in %+v", events)
				}
			} else if len(events) == 0 {
				t.Error("no status events")
			}
			// Each event is handed out once across polls.
			seen := map[agent.Event]int{}
			for _, e := range events {
				if seen[e]++; seen[e] > 1 && e.Type != "search" {
					t.Errorf("event %+v handed out twice", e)
				}
			}
			if kind == agent.KindOpenAI || kind == agent.KindPerplexity || kind == agent.KindExa {
				if st.CostUSD <= 0 {
					t.Errorf("%s reports a cost; got %v", kind, st.CostUSD)
				}
			}
			if n := sim.AgentSubmissions(kind, submissionKey(kind, req)); n != 1 {
				t.Errorf("the provider saw %d submissions, want 1", n)
			}
		})
	}
}

func TestAgentsOutputSchemaGivesBasisPerField(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["depth","lakes"],"properties":{"depth":{"type":"string"},"lakes":{"type":"integer"}}}`)
	for _, kind := range agent.Kinds {
		t.Run(kind, func(t *testing.T) {
			sim, url := newSim(t)
			a := newAgent(t, url, kind)
			id, err := a.Submit(context.Background(), agent.Request{Ref: "rr_schema", Input: "How deep is Lake Constance", OutputSchema: schema})
			if err != nil {
				t.Fatal(err)
			}
			st, _, _ := run(t, sim, a, id)
			if st.State != agent.Completed {
				t.Fatalf("state %s (%s)", st.State, st.Error)
			}
			res := st.Result
			var out struct {
				Depth *string `json:"depth"`
				Lakes *int    `json:"lakes"`
			}
			if err := json.Unmarshal(res.Output, &out); err != nil || out.Depth == nil || out.Lakes == nil {
				t.Fatalf("output %s does not fit the schema: %v", res.Output, err)
			}
			for _, f := range []string{"depth", "lakes"} {
				b, ok := res.Basis[f]
				if !ok || len(b.Citations) == 0 {
					t.Fatalf("field %s has no basis with citations: %+v", f, res.Basis)
				}
				for _, c := range b.Citations {
					if !slices.ContainsFunc(res.Sources, func(s agent.Source) bool { return s.URL == c.URL }) {
						t.Errorf("field %s cites %s, not among the sources", f, c.URL)
					}
				}
			}
			checkReport(t, res)
		})
	}
}

func TestAgentsCancelReachesTheProvider(t *testing.T) {
	for _, kind := range agent.Kinds {
		t.Run(kind, func(t *testing.T) {
			sim, url := newSim(t)
			a := newAgent(t, url, kind)
			ctx := context.Background()
			id, err := a.Submit(ctx, agent.Request{Ref: "rr_cancel", Input: "A long question to cancel"})
			if err != nil {
				t.Fatal(err)
			}
			sim.AdvanceAgents(5 * time.Second) // running
			if err := a.Cancel(ctx, id); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			st, _, _ := run(t, sim, a, id)
			if st.State != agent.Cancelled {
				t.Fatalf("after cancel the provider says %s", st.State)
			}
			if st.Result != nil {
				t.Error("a cancelled run has a result")
			}
		})
	}
}

func TestAgentsFindAfterCrashBetweenAcceptAndStore(t *testing.T) {
	for _, kind := range agent.Kinds {
		t.Run(kind, func(t *testing.T) {
			sim, url := newSim(t)
			ctx := context.Background()
			req := agent.Request{Ref: "rr_crash_" + kind, Input: "Who maintains the Rhine dams"}
			req.Group = group(t, newAgent(t, url, kind), req.Ref)
			id, err := newAgent(t, url, kind).Submit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			// The worker dies before storing id; the next one has only the reference.
			// Another run of the tenant is submitted meanwhile.
			other := newAgent(t, url, kind)
			if _, err := other.Submit(ctx, agent.Request{Ref: "rr_other", Input: "Another question", Group: req.Group}); err != nil {
				t.Fatal(err)
			}
			found, ok, err := other.Find(ctx, req.Ref, req.Group)
			switch kind {
			case agent.KindExa, agent.KindParallel: // list runs (Parallel: the group's) by metadata
				if err != nil || !ok || found != id {
					t.Fatalf("Find = %q %v %v, want %q", found, ok, err, id)
				}
				if _, ok, err := other.Find(ctx, "rr_never", req.Group); ok || err != nil {
					t.Errorf("Find of an unknown reference: %v %v", ok, err)
				}
				if _, _, err := other.Find(ctx, req.Ref, ""); kind == agent.KindParallel && !errors.Is(err, agent.ErrNoLookup) {
					t.Errorf("Parallel's Find without a group: %v, want ErrNoLookup", err)
				}
			default: // no lookup: the caller must not resubmit
				if !errors.Is(err, agent.ErrNoLookup) || ok {
					t.Fatalf("Find = %q %v %v, want ErrNoLookup", found, ok, err)
				}
			}
			if n := sim.AgentSubmissions(kind, submissionKey(kind, req)); n != 1 {
				t.Errorf("the provider saw %d submissions, want 1", n)
			}
		})
	}
}

func TestGeminiPlanIsApprovedOrReplaced(t *testing.T) {
	for _, replace := range []string{"", "1. Only the dams built after 1950"} {
		sim, url := newSim(t)
		a := newAgent(t, url, agent.KindGemini)
		ctx := context.Background()
		id, err := a.Submit(ctx, agent.Request{Ref: "rr_plan", Input: "Who maintains the Rhine dams", ReviewPlan: true})
		if err != nil {
			t.Fatal(err)
		}
		st, events, _ := run(t, sim, a, id)
		if st.State != agent.RequiresPlan {
			t.Fatalf("state %s, want requires_action", st.State)
		}
		i := slices.IndexFunc(events, func(e agent.Event) bool { return e.Type == "plan" })
		if i < 0 || !strings.Contains(events[i].Text, "1. ") {
			t.Fatalf("no plan event in %+v", events)
		}
		next, err := a.(agent.Planner).Approve(ctx, "rr_plan", id, replace)
		if err != nil || next == "" || next == id {
			t.Fatalf("approve: %q %v", next, err)
		}
		// The approval's interaction carries the run and the plan it follows.
		if st, err := a.Poll(ctx, next, ""); err != nil || st.Ref != "rr_plan" || st.Follows != id {
			t.Errorf("the approval's interaction: ref %q follows %q (%v), want rr_plan and %s", st.Ref, st.Follows, err, id)
		}
		if n := sim.AgentSubmissions(agent.KindGemini, "Who maintains the Rhine dams"); n != 1 {
			t.Errorf("the provider saw %d approvals", n)
		}
		st, _, _ = run(t, sim, a, next)
		if st.State != agent.Completed {
			t.Fatalf("after approval: %s", st.State)
		}
		checkReport(t, st.Result)
		if _, err := a.(agent.Planner).Approve(ctx, "rr_plan", next, ""); err == nil {
			t.Error("approving a run that waits for no plan succeeded")
		}
	}
	a := newAgent(t, "http://127.0.0.1:1", agent.KindExa)
	if _, ok := a.(agent.Planner); ok {
		t.Error("Exa has a plan step to approve")
	}
}

// hookSink collects webhook deliveries.
type hookSink struct {
	got chan *http.Request
}

func newHookSink(t *testing.T) (*hookSink, string) {
	s := &hookSink{got: make(chan *http.Request, 4)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		s.got <- r
	}))
	t.Cleanup(hs.Close)
	return s, hs.URL
}

func (s *hookSink) next(t *testing.T) (http.Header, []byte) {
	t.Helper()
	select {
	case r := <-s.got:
		b, _ := io.ReadAll(r.Body)
		return r.Header, b
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook arrived")
	}
	return nil, nil
}

func TestWebhooksVerifyAndNameTheRun(t *testing.T) {
	const openAISecret = "whsec_c2ltLXNpbS1zaW0tc2ltLXNpbS1zaW0tc2ltLXNpbS0="
	for _, kind := range []string{agent.KindOpenAI, agent.KindGemini, agent.KindParallel} {
		t.Run(kind, func(t *testing.T) {
			sim, url := newSim(t)
			sink, hookURL := newHookSink(t)
			secret := openAISecret
			// Gemini's planning interaction: its webhook names it as Submit did.
			req := agent.Request{Ref: "rr_hook_" + kind, Input: "Who maintains the Rhine dams", ReviewPlan: kind == agent.KindGemini}
			if kind != agent.KindParallel {
				sim.SetAgentWebhook(kind, hookURL, secret) // the project's endpoint
			} else {
				secret = "parallel-account-secret"
				sim.SetAgentWebhook(kind, "", secret)
				req.Webhook = hookURL
			}
			a := newAgent(t, url, kind)
			id, err := a.Submit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			sim.AdvanceAgents(time.Minute)
			h, body := sink.next(t)
			w, err := agent.VerifyWebhook(kind, secret, h, body, time.Now())
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if w.ID != id || w.State != agent.Completed {
				t.Fatalf("webhook %+v, want %s completed", w, id)
			}
			ref := w.Ref
			if kind == agent.KindOpenAI { // the event names the response only
				st, err := a.Poll(context.Background(), w.ID, "")
				if err != nil {
					t.Fatal(err)
				}
				ref = st.Ref
			}
			if ref != req.Ref {
				t.Errorf("the webhook leads to reference %q, want %q", ref, req.Ref)
			}
			if _, err := agent.VerifyWebhook(kind, secret, h, append(body, ' '), time.Now()); err == nil {
				t.Error("a changed body verified")
			}
			if _, err := agent.VerifyWebhook(kind, secret, h, body, time.Now().Add(time.Hour)); err == nil {
				t.Error("a stale delivery verified")
			}
		})
	}
	if _, err := agent.VerifyWebhook(agent.KindExa, "x", http.Header{}, nil, time.Now()); err == nil {
		t.Error("Exa has no webhooks, yet one verified")
	}
}

func TestFailedRunsAndCosts(t *testing.T) {
	sim, url := newSim(t)
	ctx := context.Background()
	// Parallel does not bill a failed run.
	a := newAgent(t, url, agent.KindParallel)
	id, err := a.Submit(ctx, agent.Request{Ref: "rr_fail", Input: "A doomed question sim:agent-fail"})
	if err != nil {
		t.Fatal(err)
	}
	st, _, _ := run(t, sim, a, id)
	if st.State != agent.Failed || !st.Unbilled || st.Error == "" {
		t.Errorf("failed Parallel run: %+v", st)
	}
	// Exa's reported cost grows while it runs and ends at what it reports.
	e := newAgent(t, url, agent.KindExa)
	id, err = e.Submit(ctx, agent.Request{Ref: "rr_cost", Input: "An expensive question sim:agent-cost=20"})
	if err != nil {
		t.Fatal(err)
	}
	sim.AdvanceAgents(10 * time.Second)
	mid, err := e.Poll(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if mid.State != agent.Running || mid.CostUSD <= 0 || mid.CostUSD >= 20 {
		t.Errorf("mid-run: %s cost %v", mid.State, mid.CostUSD)
	}
	end, _, _ := run(t, sim, e, id)
	if end.Result == nil || end.CostUSD != 20 {
		t.Errorf("final cost %v, result %+v", end.CostUSD, end.Result)
	}
}

func TestRefusedKeyIsPassedOverWithoutASecondSubmission(t *testing.T) {
	sim, url := newSim(t)
	sim.SetKeyFault("/exa-agent/agent/runs", "k1", http.StatusUnauthorized, 0, 0)
	a := newAgent(t, url, agent.KindExa, "k1", "k2")
	req := agent.Request{Ref: "rr_keys", Input: "Who maintains the Rhine dams"}
	for range 2 { // round robin starts on each key once
		if _, err := a.Submit(context.Background(), agent.Request{Ref: req.Ref + "x", Input: req.Input}); err != nil {
			t.Fatalf("submit with one refused key: %v", err)
		}
	}
	if n := sim.AgentSubmissions(agent.KindExa, req.Ref+"x"); n != 2 {
		t.Errorf("submissions %d, want 2 (one per call, none for the refused key)", n)
	}
	// With every key refused the error says so without the key.
	sim.SetKeyFault("/exa-agent/agent/runs", "k2", http.StatusUnauthorized, 0, 0)
	_, err := a.Submit(context.Background(), req)
	if err == nil || strings.Contains(err.Error(), "k1") || strings.Contains(err.Error(), "k2") || strings.Contains(err.Error(), url) {
		t.Errorf("error %v", err)
	}
}

// TestAgentsReadTheDocumentedShapes runs each agent on its CONSTRUCTED fixture (the
// simulator answers it verbatim for "sim:fixture") and checks what the agent reads
// from it.
func TestAgentsReadTheDocumentedShapes(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		report   string // the report exactly
		sources  int
		cost     float64
		searches int
		basis    map[string]int // field: citations
		conf     map[string]string
	}{
		{kind: agent.KindOpenAI, sources: 3, searches: 2,
			// 48210 input and 9120 output tokens at o3-deep-research's list price, and
			// 4 web search calls at $0.01.
			cost:   48210*10/1e6 + 9120*40/1e6 + 4*0.01,
			report: "Lake Constance covers about 536 km² and is shared by Germany, Austria and Switzerland [1]. Its water supplies around 4 million people in Baden-Württemberg [2], and the lake has no agreed border in its main basin [3]."},
		{kind: agent.KindGemini, sources: 2, searches: 1,
			report: "# Lake Constance\n\nLake Constance covers about 536 km² and borders Germany, Austria and Switzerland. [1] Around 4 million people drink its water. [2]"},
		{kind: agent.KindPerplexity, sources: 2, searches: 2, cost: 0.02928,
			report: "Lake Constance covers about 536 km². [1] Around 4 million people drink its water. [2]"},
		{kind: agent.KindParallel, sources: 2, basis: map[string]int{"area_km2": 1, "countries": 2},
			conf:   map[string]string{"area_km2": "high", "countries": "medium"},
			report: "- **area_km2**: 536 km² [1]\n- **countries**: Germany, Austria and Switzerland [2] [1]"},
		{kind: agent.KindExa, sources: 2, searches: 6, cost: 0.162, basis: map[string]int{"area_km2": 1, "countries": 2},
			// countries[0] is high, countries[2] medium: the field is as sure as its least.
			conf:   map[string]string{"area_km2": "high", "countries": "medium"},
			report: "Lake Constance covers 536 km² and is bordered by three countries.\n\n- **area_km2**: 536 [1]\n- **countries**: [\"Germany\",\"Austria\",\"Switzerland\"] [2] [1]"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			sim, url := newSim(t)
			a := newAgent(t, url, tc.kind)
			id, err := a.Submit(context.Background(), agent.Request{Ref: "rr_fixture0001", Input: "Lake Constance sim:fixture"})
			if err != nil {
				t.Fatal(err)
			}
			st, _, _ := run(t, sim, a, id)
			if st.State != agent.Completed {
				t.Fatalf("state %s", st.State)
			}
			res := st.Result
			if res.Report != tc.report {
				t.Errorf("report\n%q\nwant\n%q", res.Report, tc.report)
			}
			if len(res.Sources) != tc.sources || res.Searches != tc.searches {
				t.Errorf("%d sources, %d searches; want %d, %d", len(res.Sources), res.Searches, tc.sources, tc.searches)
			}
			if d := st.CostUSD - tc.cost; d > 1e-9 || d < -1e-9 {
				t.Errorf("cost %v, want %v", st.CostUSD, tc.cost)
			}
			for f, n := range tc.basis {
				if b := res.Basis[f]; len(b.Citations) != n || b.Confidence != tc.conf[f] {
					t.Errorf("basis of %s: %+v, want %d citations, confidence %s", f, b, n, tc.conf[f])
				}
			}
			checkReport(t, res)
		})
	}
}

// TestAgentsWhenTheAcceptIsLost: the provider records the submission but its answer
// never arrives (the window between the provider's accept and the fleet's store).
// Submit fails without a status; Find gives the run back where the provider can
// list runs (Exa; Parallel within the run's task group, made before the submit) and
// says ErrNoLookup elsewhere; the provider saw one submission.
func TestAgentsWhenTheAcceptIsLost(t *testing.T) {
	for _, kind := range agent.Kinds {
		t.Run(kind, func(t *testing.T) {
			sim, url := newSim(t)
			a := newAgent(t, url, kind)
			ctx := context.Background()
			req := agent.Request{Ref: "rr_lost_" + kind, Input: "Who maintains the Rhine dams sim:agent-drop"}
			req.Group = group(t, a, req.Ref)
			if id, err := a.Submit(ctx, req); err == nil {
				t.Fatalf("the lost answer gave id %q", id)
			}
			id, ok, err := a.Find(ctx, req.Ref, req.Group)
			if kind == agent.KindExa || kind == agent.KindParallel {
				if err != nil || !ok || id == "" {
					t.Fatalf("Find: %q %v %v", id, ok, err)
				}
				if st, _, _ := run(t, sim, a, id); st.State != agent.Completed {
					t.Errorf("the found run ends %s", st.State)
				}
			} else if !errors.Is(err, agent.ErrNoLookup) {
				t.Fatalf("Find: %v, want ErrNoLookup", err)
			}
			if n := sim.AgentSubmissions(kind, submissionKey(kind, req)); n != 1 {
				t.Errorf("the provider saw %d submissions", n)
			}
		})
	}
}

// group makes the run's group where the agent submits into one (Parallel), as the
// research worker does before it submits; "" for the others.
func group(t *testing.T, a agent.Agent, ref string) string {
	t.Helper()
	g, ok := a.(agent.Grouper)
	if !ok {
		return ""
	}
	id, err := g.Group(context.Background(), ref)
	if err != nil || id == "" {
		t.Fatalf("group: %q %v", id, err)
	}
	return id
}

// TestParallelGroupListingReadsTheDocumentedShape: Find reads a task_run.state event
// of Parallel's group runs stream in its CONSTRUCTED shape (the simulator streams it
// verbatim for "sim:fixture").
func TestParallelGroupListingReadsTheDocumentedShape(t *testing.T) {
	_, url := newSim(t)
	a := newAgent(t, url, agent.KindParallel)
	ctx := context.Background()
	g := group(t, a, "rr_fixture0001")
	if _, err := a.Submit(ctx, agent.Request{Ref: "rr_fixture0001", Input: "Who maintains the Rhine dams sim:fixture", Group: g}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := a.Find(ctx, "rr_fixture0001", g)
	if err != nil || !ok || id != "trun_9907962f83aa4d9d98fd7f4bf745d654" {
		t.Fatalf("Find = %q %v %v, want the fixture's run", id, ok, err)
	}
}
