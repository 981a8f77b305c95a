package fleet_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

func agentFleet(t *testing.T) *fleettest.Fleet {
	return fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.ResearchAgentPoll = 50 * time.Millisecond }))
}

// waitAgentRun follows a run carried out at a simulated provider, moving the
// simulator's clock while it waits.
func waitAgentRun(t *testing.T, f *fleettest.Fleet, id string, done func(researchRun) bool) researchRun {
	t.Helper()
	var r researchRun
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r = getResearch(t, f, id); done(r) {
			return r
		}
		f.Sim.AdvanceAgents(3 * time.Second)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s never got there: %+v", id, r)
	return r
}

// providerRun is the simulated provider's view of a run's provider id.
func providerRun(t *testing.T, f *fleettest.Fleet, kind, runID string) agent.Status {
	t.Helper()
	r, err := f.Store.Research.GetRun(context.Background(), runID)
	if err != nil || r.AgentID == "" {
		t.Fatalf("run %s has no provider id (%v)", runID, err)
	}
	a, err := agent.New(kind, simulator.AgentBaseURL(f.SimURL, kind), []string{"k"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.Poll(context.Background(), r.AgentID, "")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestResearchAgentsRunAtTheProvider(t *testing.T) {
	t.Parallel()
	f := agentFleet(t)
	code, b, _ := f.Do(t, http.MethodGet, "/v1/research/agents", nil)
	var list struct {
		Data []struct {
			Name     string             `json:"name"`
			Kind     string             `json:"kind"`
			PriceUSD map[string]float64 `json:"price_usd"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &list); code != http.StatusOK || len(list.Data) != len(agent.Kinds) {
		t.Fatalf("GET /v1/research/agents: %d %s", code, b)
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"depth": map[string]any{"type": "string"}, "lakes": map[string]any{"type": "integer"}}}
	for _, kind := range agent.Kinds {
		t.Run(kind, func(t *testing.T) {
			input := "How deep is Lake Constance, asked of " + kind
			r := startResearch(t, f, map[string]any{"input": input, "agent": kind, "output_schema": schema})
			r = waitAgentRun(t, f, r.ID, ended)
			if r.Status != "completed" || r.Output == nil {
				t.Fatalf("run: %+v", r)
			}
			if r.Output.Citations.Cited == 0 || r.Output.Citations.Valid == 0 || !strings.Contains(r.Output.Report, "## Sources") {
				t.Errorf("citations %+v, report %q", r.Output.Citations, r.Output.Report)
			}
			for _, fld := range []string{"depth", "lakes"} {
				if len(r.Output.Basis[fld].Citations) == 0 {
					t.Errorf("field %s has no basis: %+v", fld, r.Output.Basis)
				}
			}
			if r.Usage.CostUSD <= 0 {
				t.Errorf("usage %+v", r.Usage)
			}
			key := r.ID
			if kind == agent.KindPerplexity {
				key = input
			}
			if n := f.Sim.AgentSubmissions(kind, key); n != 1 {
				t.Errorf("the provider saw %d submissions", n)
			}
		})
	}
	code, b, _ = f.Do(t, http.MethodPost, "/v1/research", map[string]any{"input": "q", "agent": "no-such-agent"})
	if code != http.StatusNotFound || !strings.Contains(string(b), "agent_not_found") {
		t.Errorf("an unknown agent: %d %s", code, b)
	}
}

func TestResearchAgentCancelAndCapReachTheProvider(t *testing.T) {
	t.Parallel()
	f := agentFleet(t)
	// Cancel reaches each provider.
	for _, kind := range agent.Kinds {
		r := startResearch(t, f, map[string]any{"input": "A long question for " + kind + " sim:agent-time=1h", "agent": kind})
		waitAgentRun(t, f, r.ID, func(researchRun) bool {
			got, err := f.Store.Research.GetRun(context.Background(), r.ID)
			return err == nil && got.AgentID != ""
		})
		if code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+r.ID+"/cancel", nil); code != http.StatusOK {
			t.Fatalf("%s: cancel: %d %s", kind, code, b)
		}
		if r = waitAgentRun(t, f, r.ID, ended); r.Status != "cancelled" {
			t.Errorf("%s: after cancel: %s", kind, r.Status)
		}
		if st := providerRun(t, f, kind, r.ID); st.State != agent.Cancelled {
			t.Errorf("%s: the provider's run is %s", kind, st.State)
		}
	}
	// A reported cost above the run's cap cancels the provider's run.
	r := startResearch(t, f, map[string]any{"input": "An expensive question sim:agent-cost=20", "agent": agent.KindExa, "budget": map[string]any{"max_usd": 5}})
	r = waitAgentRun(t, f, r.ID, ended)
	if r.Status != "failed" {
		t.Fatalf("over its cap the run is %s", r.Status)
	}
	if st := providerRun(t, f, agent.KindExa, r.ID); st.State != agent.Cancelled || st.CostUSD <= 5 || st.CostUSD >= 20 {
		t.Errorf("the provider's run: %s at $%v", st.State, st.CostUSD)
	}
}

// An agent's run takes its steps on its run's lane, its polls (redeliveries of the
// step) among them: the researcher family's own consumer, which takes the steps
// published to no lane, delivers none.
func TestResearchAgentStepsAreOnTheRunsLane(t *testing.T) {
	t.Parallel()
	f := agentFleet(t)
	r := startResearch(t, f, map[string]any{"input": "How deep is Lake Ohrid?", "agent": agent.KindExa})
	if r = waitAgentRun(t, f, r.ID, ended); r.Status != "completed" {
		t.Fatalf("run: %+v", r)
	}
	nc, err := nats.Connect(f.NATS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	delivered := func(name string) uint64 {
		c, err := js.Consumer(ctx(t), bus.StreamJobs, name)
		if err != nil {
			t.Fatalf("consumer %s: %v", name, err)
		}
		return c.CachedInfo().Delivered.Consumer
	}
	if n := delivered(bus.ConsumerResearch); n != 0 {
		t.Errorf("the family's own consumer delivered %d steps", n)
	}
	// The run's start, and at least one poll (the provider's run is queued at first).
	if n := delivered(bus.ConsumerResearch + "__" + bus.BandAsync + "_" + bus.Token("default")); n < 2 {
		t.Errorf("the run's lane delivered %d steps", n)
	}
}

// TestResearchAgentLostAccept: for each agent the provider accepts the run but its
// answer is lost (as a worker killed between the provider's accept and the fleet's
// store sees it). Exa lists recent runs, Parallel the runs of the run's task group:
// the next step finds the run by its reference. OpenAI, Gemini and Parallel send webhooks that carry the reference
// (OpenAI's and Gemini's to the project's endpoint, Parallel's to the URL each run
// names under FLEET_PUBLIC_URL): the webhook gives the run its id. Perplexity offers
// neither: the run fails agent_lost. The provider sees one submission every time.
func TestResearchAgentLostAccept(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const whsec = "whsec_c2ltLXNpbS1zaW0tc2ltLXNpbS1zaW0tc2ltLXNpbS0="
	secrets := map[string]string{agent.KindOpenAI: whsec, agent.KindGemini: whsec, agent.KindParallel: "parallel-account-secret"}
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) {
		e.ResearchAgentPoll, e.HTTPAddr, e.PublicURL = 50*time.Millisecond, addr, "http://"+addr
	}), fleettest.File(func(file *config.File) {
		for kind, secret := range secrets {
			ra := file.ResearchAgents[kind]
			ra.WebhookSecret = secret
			file.ResearchAgents[kind] = ra
		}
	}))
	for kind, secret := range secrets {
		hook := f.URL + "/v1/research/agents/" + kind + "/webhook"
		if kind == agent.KindParallel {
			hook = "" // each run names its own
		}
		f.Sim.SetAgentWebhook(kind, hook, secret)
	}
	// A webhook's step goes on its run's lane, as every other step.
	nc, err := nats.Connect(f.NATS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	bare, err := nc.Subscribe(bus.SubjectResearch, func(m *nats.Msg) { t.Errorf("a step on no lane: %s", m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Unsubscribe() })
	nc.Flush()
	for _, kind := range agent.Kinds {
		t.Run(kind, func(t *testing.T) {
			input := "Who maintains the Rhine dams, asked of " + kind + " sim:agent-drop"
			r := startResearch(t, f, map[string]any{"input": input, "agent": kind})
			r = waitAgentRun(t, f, r.ID, ended)
			key := r.ID
			if kind == agent.KindPerplexity {
				key = input
				if _, b, _ := f.Do(t, http.MethodGet, "/v1/research/"+r.ID, nil); r.Status != "failed" || !strings.Contains(string(b), `"agent_lost"`) {
					t.Errorf("perplexity's run: %s", b)
				}
			} else if r.Status != "completed" || r.Output == nil || r.Output.Citations.Valid == 0 {
				t.Errorf("the lost run: %+v", r)
			}
			if n := f.Sim.AgentSubmissions(kind, key); n != 1 {
				t.Errorf("the provider saw %d submissions", n)
			}
		})
	}
}

// The openai SDK's deep-research flow with OpenAI's model name: a background
// responses.create with "o3-deep-research" runs the openai-deep-research agent (the
// model is mapped to it in config), retrieve polls it to completed with the provider's
// report and its url_citation annotations, and cancel reaches the provider.
func TestDeepResearchModelRunsItsAgent(t *testing.T) {
	t.Parallel()
	f := agentFleet(t)
	c := openaiClient(f)
	params := func(q string) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: "o3-deep-research", Background: openai.Bool(true),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfWebSearch(responses.WebSearchToolTypeWebSearch)}}
	}
	resp, err := c.Responses.New(ctx(t), params("How deep is Lake Baikal?"))
	if err != nil {
		t.Fatal(err)
	}
	code, b, _ := f.Do(t, http.MethodGet, "/v1/research/agents", nil)
	if code != http.StatusOK || !strings.Contains(string(b), `"models":["o3-deep-research","o4-mini-deep-research"]`) {
		t.Errorf("GET /v1/research/agents does not name the models that run the OpenAI agent: %d %s", code, b)
	}
	if r, err := f.Store.Research.GetRun(ctx(t), resp.ID); err != nil || r.Agent != agent.KindOpenAI {
		t.Fatalf("run %s is carried out by %+v (%v), not the openai-deep-research agent", resp.ID, r, err)
	}
	for deadline := time.Now().Add(60 * time.Second); resp.Status != responses.ResponseStatusCompleted; {
		if time.Now().After(deadline) || resp.Status == responses.ResponseStatusFailed || resp.Status == responses.ResponseStatusCancelled {
			t.Fatalf("response %s: %s", resp.ID, resp.Status)
		}
		f.Sim.AdvanceAgents(3 * time.Second)
		time.Sleep(50 * time.Millisecond)
		if resp, err = c.Responses.Get(ctx(t), resp.ID, responses.ResponseGetParams{}); err != nil {
			t.Fatal(err)
		}
	}
	cites := 0
	for _, it := range resp.Output {
		if it.Type == "message" {
			for _, part := range it.AsMessage().Content {
				for _, a := range part.Annotations {
					if a.Type != "url_citation" || !strings.HasPrefix(a.URL, "https://") {
						t.Errorf("annotation %+v", a)
					}
					cites++
				}
			}
		}
	}
	if cites == 0 {
		t.Fatalf("the completed response cites nothing: %+v", resp.Output)
	}
	if n := f.Sim.AgentSubmissions(agent.KindOpenAI, resp.ID); n != 1 {
		t.Errorf("the provider saw %d submissions of the run", n)
	}

	resp, err = c.Responses.New(ctx(t), params("How deep is Lake Tanganyika?"))
	if err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, "the provider's run id stored", func() bool {
		r, err := f.Store.Research.GetRun(ctx(t), resp.ID)
		return err == nil && r.AgentID != ""
	})
	if resp, err = c.Responses.Cancel(ctx(t), resp.ID); err != nil || resp.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel: %v %+v", err, resp)
	}
	if st := providerRun(t, f, agent.KindOpenAI, resp.ID); st.State != agent.Cancelled {
		t.Errorf("the provider's run is %s after the cancel", st.State)
	}

	// The model the client named is the model the provider runs.
	p := params("How deep is Lake Malawi?")
	p.Model = "o4-mini-deep-research"
	if resp, err = c.Responses.New(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	var stored string
	fleettest.Eventually(t, "the provider's run id stored", func() bool {
		r, err := f.Store.Research.GetRun(ctx(t), resp.ID)
		stored = r.AgentID
		return err == nil && r.AgentID != ""
	})
	var atProvider struct{ Model string }
	if code, b := getJSON(t, simulator.AgentBaseURL(f.SimURL, agent.KindOpenAI)+"/responses/"+stored, &atProvider); code != http.StatusOK || atProvider.Model != "o4-mini-deep-research" {
		t.Errorf("the provider runs %q, not the model the client named: %d %s", atProvider.Model, code, b)
	}
}

// getJSON reads url's JSON answer into v.
func getJSON(t *testing.T, url string, v any) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, v)
	return resp.StatusCode, b
}

// TestGeminiPlanReview: a Gemini run with plan "review" stops at the agent's research
// plan (requires_action, the plan shown); approving it through POST
// /v1/research/{id}/plan runs the plan as an interaction chained to the plan's, and
// the run completes with a checked report.
func TestGeminiPlanReview(t *testing.T) {
	t.Parallel()
	f := agentFleet(t)
	input := "How deep is Lake Geneva, planned with Gemini"
	r := startResearch(t, f, map[string]any{"input": input, "agent": agent.KindGemini, "plan": "review"})
	r = waitAgentRun(t, f, r.ID, func(r researchRun) bool { return r.Status == "requires_action" || ended(r) })
	if r.Status != "requires_action" || r.Plan == nil || len(r.Plan.Questions) == 0 || !strings.Contains(r.Plan.Questions[0].Question, "Research:") {
		t.Fatalf("before approval: %+v", r)
	}
	if code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+r.ID+"/plan", map[string]any{"action": "approve"}); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, b)
	}
	if r = waitAgentRun(t, f, r.ID, ended); r.Status != "completed" || r.Output == nil || r.Output.Citations.Valid == 0 {
		t.Fatalf("after approval: %+v", r)
	}
	// One planning interaction under the run's reference, one chained execution.
	if n := f.Sim.AgentSubmissions(agent.KindGemini, r.ID); n != 1 {
		t.Errorf("the provider saw %d planning submissions", n)
	}
	if n := f.Sim.AgentSubmissions(agent.KindGemini, input); n != 1 {
		t.Errorf("the provider saw %d executions", n)
	}
}

// TestResearchAgentRunSurvivesRestart: with every agent's provider id stored and
// the first poll not yet made, the fleet is stopped (its work cut off); a fleet
// started on the same NATS and Redis polls the stored ids: each provider saw one
// submission and every run completes.
func TestResearchAgentRunSurvivesRestart(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = bustest.Server(t), prefix
	env.DrainTimeout = time.Millisecond
	env.ResearchAgentPoll = 3 * time.Second // the first poll comes well after the store
	r := &restartable{t: t, env: env, file: demo.Config(simURL, sim.EngineConfigs(simURL)), rdb: rdb}
	r.startFleet()
	f := &fleettest.Fleet{URL: r.url, Sim: sim, SimURL: simURL, Store: fleettest.Store(t, rdb, prefix, env.NATSURL, env.Namespace, env.Retention)}
	ids := map[string]string{}
	for _, kind := range agent.Kinds {
		ids[kind] = startResearch(t, f, map[string]any{"input": "Who maintains the Rhine dams, asked of " + kind, "agent": kind}).ID
	}
	fleettest.Eventually(t, "every provider id stored", func() bool {
		for _, id := range ids {
			if got, err := f.Store.Research.GetRun(ctx(t), id); err != nil || got.AgentID == "" {
				return false
			}
		}
		return true
	})
	r.stopFleet()
	requests := sim.Stats().Requests
	for _, kind := range agent.Kinds {
		want := int64(1)
		if kind == agent.KindParallel {
			want = 2 // the run's task group, then the submission into it
		}
		if n := requests[kind]; n != want {
			t.Fatalf("%s had %d requests before the stop, want the submission only", kind, n)
		}
	}
	r.startFleet()
	f.URL = r.url
	for kind, id := range ids {
		if got := waitAgentRun(t, f, id, ended); got.Status != "completed" {
			t.Errorf("%s: after the restart the run is %+v", kind, got)
		}
		key := id
		if kind == agent.KindPerplexity {
			key = "Who maintains the Rhine dams, asked of " + kind
		}
		if n := sim.AgentSubmissions(kind, key); n != 1 {
			t.Errorf("%s saw %d submissions", kind, n)
		}
	}
}
