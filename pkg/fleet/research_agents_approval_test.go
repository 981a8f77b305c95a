package fleet_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
)

// TestGeminiApprovalLostAccept: a Gemini run with plan review is approved, and
// Gemini accepts the approval's interaction but its answer is lost (as a worker
// killed between the approval's accept and the fleet's store sees it). With Gemini's
// webhook configured, the approval's end webhook (its user metadata names the run and
// the plan it follows) gives the run the new interaction's id and the run completes;
// without it the run fails agent_lost. Either way Gemini saw one approval.
func TestGeminiApprovalLostAccept(t *testing.T) {
	t.Parallel()
	const whsec = "whsec_c2ltLXNpbS1zaW0tc2ltLXNpbS1zaW0tc2ltLXNpbS0="
	for _, hooked := range []bool{true, false} {
		name := map[bool]string{true: "webhook", false: "polled only"}[hooked]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			f := fleettest.Start(t, fleettest.Env(func(e *config.Env) {
				e.ResearchAgentPoll, e.HTTPAddr = 50*time.Millisecond, addr
			}), fleettest.File(func(file *config.File) {
				if hooked {
					ra := file.ResearchAgents[agent.KindGemini]
					ra.WebhookSecret = whsec
					file.ResearchAgents[agent.KindGemini] = ra
				}
			}))
			if hooked {
				f.Sim.SetAgentWebhook(agent.KindGemini, f.URL+"/v1/research/agents/"+agent.KindGemini+"/webhook", whsec)
			}
			input := "How deep is Lake Geneva, planned with Gemini sim:agent-drop-chained"
			r := startResearch(t, f, map[string]any{"input": input, "agent": agent.KindGemini, "plan": "review"})
			r = waitAgentRun(t, f, r.ID, func(r researchRun) bool { return r.Status == "requires_action" || ended(r) })
			if r.Status != "requires_action" {
				t.Fatalf("before approval: %+v", r)
			}
			if code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+r.ID+"/plan", map[string]any{"action": "approve"}); code != http.StatusOK {
				t.Fatalf("approve: %d %s", code, b)
			}
			r = waitAgentRun(t, f, r.ID, ended)
			if hooked {
				if r.Status != "completed" || r.Output == nil || r.Output.Citations.Valid == 0 {
					t.Errorf("after the lost approval: %+v", r)
				}
			} else if _, b, _ := f.Do(t, http.MethodGet, "/v1/research/"+r.ID, nil); r.Status != "failed" || !strings.Contains(string(b), `"agent_lost"`) {
				t.Errorf("after the lost approval, polled only: %s", b)
			}
			if n := f.Sim.AgentSubmissions(agent.KindGemini, r.ID); n != 1 {
				t.Errorf("the provider saw %d planning submissions", n)
			}
			if n := f.Sim.AgentSubmissions(agent.KindGemini, input); n != 1 {
				t.Errorf("the provider saw %d approvals, want 1", n)
			}
		})
	}
}

// TestParallelLostAcceptFoundInItsGroup: with no webhook configured, a Parallel run
// whose accept is lost (as a worker killed between Parallel's accept and the fleet's
// store sees it) is found by listing the runs of its task group, made and stored
// before the submit: the run completes and Parallel saw one submission.
func TestParallelLostAcceptFoundInItsGroup(t *testing.T) {
	t.Parallel()
	f := agentFleet(t)
	r := startResearch(t, f, map[string]any{"input": "Who maintains the Rhine dams, asked of Parallel sim:agent-drop", "agent": agent.KindParallel})
	r = waitAgentRun(t, f, r.ID, ended)
	if r.Status != "completed" || r.Output == nil || r.Output.Citations.Valid == 0 {
		_, b, _ := f.Do(t, http.MethodGet, "/v1/research/"+r.ID, nil)
		t.Errorf("the lost run: %s", b)
	}
	if n := f.Sim.AgentSubmissions(agent.KindParallel, r.ID); n != 1 {
		t.Errorf("the provider saw %d submissions", n)
	}
}
