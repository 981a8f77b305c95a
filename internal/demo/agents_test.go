package demo_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// TestDemoConfiguresEveryResearchAgent: make run's configuration names one research
// agent per kind, each reaching its simulated provider and finishing a run there.
func TestDemoConfiguresEveryResearchAgent(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	hs := httptest.NewServer(sim)
	defer hs.Close()
	f := demo.Config(hs.URL, sim.EngineConfigs(hs.URL))
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := len(f.ResearchAgentNames()); got != len(agent.Kinds) {
		t.Fatalf("%d research agents, want %d", got, len(agent.Kinds))
	}
	for _, kind := range agent.Kinds {
		ra := f.ResearchAgents[kind]
		if ra.Kind != kind || ra.PriceUSD.For("medium") <= 0 {
			t.Errorf("%s: %+v", kind, ra)
		}
		a, err := f.NewResearchAgent(kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		id, err := a.Submit(ctx, agent.Request{Ref: "rr_demo_" + kind, Input: "What is the demo about"})
		if err != nil {
			t.Fatalf("%s: submit: %v", kind, err)
		}
		sim.AdvanceAgents(time.Hour)
		st, err := a.Poll(ctx, id, "")
		if err != nil || st.State != agent.Completed || st.Result == nil || len(st.Result.Sources) == 0 {
			t.Errorf("%s: %+v %v", kind, st, err)
		}
	}
}
