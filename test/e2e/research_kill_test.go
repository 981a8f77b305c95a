package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A chat worker process that dies (FLEET_FAILPOINT: it exits there, nothing
// acknowledged, nothing drained) right after a provider accepted a research agent's
// run, before the run's provider id is stored, leaves the run to the next worker,
// and the provider sees one submission. Exa lists recent runs: the next worker finds
// the run by its reference. Gemini's approval of a reviewed plan, a new paid
// interaction, has no lookup: its end webhook, which names the plan it follows,
// gives the run its id.
func TestResearchAgentWorkerKilledBetweenAcceptAndStore(t *testing.T) {
	t.Parallel()
	const whsec = "whsec_c2ltLXNpbS1zaW0tc2ltLXNpbS1zaW0tc2ltLXNpbS0="
	for _, c := range []struct {
		name, kind, point, input string
		review                   bool
	}{
		{"submission", agent.KindExa, "research.agent_accepted", "How deep is Lake Ohrid?", false},
		{"approval", agent.KindGemini, "research.agent_approved", "How deep is Lake Prespa?", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := newCluster(t, func(f *config.File) {
				ra := f.ResearchAgents[agent.KindGemini]
				ra.WebhookSecretEnv = "SIM_GEMINI_WEBHOOK_SECRET"
				f.ResearchAgents[agent.KindGemini] = ra
			})
			cl.env = append(cl.env, "SIM_GEMINI_WEBHOOK_SECRET="+whsec, "FLEET_RESEARCH_AGENT_POLL=100ms")
			cl.startIngress()
			cl.sim.SetAgentWebhook(agent.KindGemini, cl.url+"/v1/research/agents/"+agent.KindGemini+"/webhook", whsec)
			crashing := cl.start("chatworker-crashing", "chatworker", "FLEET_FAILPOINT="+c.point)
			body := map[string]any{"input": c.input, "agent": c.kind}
			if c.review {
				body["plan"] = "review"
			}
			id := cl.startRun(body)
			if c.review {
				cl.waitRun(id, func(r *state.Run) bool { return r.Status == state.RunRequiresAction || state.RunEnded(r.Status) })
				if code := cl.post("/v1/research/"+id+"/plan", map[string]any{"action": "approve"}); code != http.StatusOK {
					t.Fatalf("approve: %d", code)
				}
			}
			cl.eventually("the failpoint", crashing.exited)
			if code := crashing.cmd.ProcessState.ExitCode(); code != 3 {
				t.Fatalf("the crashing worker exited %d, want the failpoint's 3", code)
			}
			cl.start("chatworker-2", "chatworker")
			if r := cl.waitRun(id, func(r *state.Run) bool { return state.RunEnded(r.Status) }); r.Status != state.RunCompleted {
				t.Fatalf("after the kill the run is %s: %s", r.Status, r.Error)
			}
			// Gemini counts the planning interaction under the run's reference and the
			// approved plan's execution under the question.
			key := id
			if c.review {
				key = c.input
			}
			if n := cl.sim.AgentSubmissions(c.kind, key); n != 1 {
				t.Errorf("the provider saw %d submissions", n)
			}
		})
	}
}

// startRun starts a research run and returns its id.
func (c *cluster) startRun(body map[string]any) string {
	c.t.Helper()
	return c.accepted("/v1/research", body)
}

// post sends body to the ingress and returns the status.
func (c *cluster) post(path string, body any) int {
	c.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(c.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitRun waits for run id to satisfy done, moving the simulated providers' clock
// while it waits.
func (c *cluster) waitRun(id string, done func(*state.Run) bool) *state.Run {
	c.t.Helper()
	var r *state.Run
	c.eventually("run "+id, func() bool {
		var err error
		r, err = c.store.Research.GetRun(context.Background(), id)
		if err == nil && done(r) {
			return true
		}
		c.sim.AdvanceAgents(3 * time.Second)
		time.Sleep(50 * time.Millisecond)
		return false
	})
	return r
}
