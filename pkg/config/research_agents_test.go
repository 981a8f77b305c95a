package config_test

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
)

func TestResearchAgentsSection(t *testing.T) {
	f := parseExample(t)
	if got := f.ResearchAgentNames(); strings.Join(got, ",") != "deep-research,gemini-deep-research" {
		t.Fatalf("agents %v", got)
	}
	if p := f.ResearchAgents["deep-research"].PriceUSD; p.For("high") != 6 || p.For("") != 3 || p.For("max") != 10 {
		t.Errorf("prices %+v", p)
	}
	if err := f.Resolve(config.MapLookup(exampleSecrets)); err != nil {
		t.Fatal(err)
	}
	a, err := f.NewResearchAgent("deep-research", nil)
	if err != nil || a == nil {
		t.Fatalf("NewResearchAgent: %v", err)
	}
	if _, err := f.NewResearchAgent("nope", nil); err == nil {
		t.Error("an unconfigured agent was built")
	}

	for _, tc := range []struct {
		ra   config.ResearchAgent
		want string
	}{
		{config.ResearchAgent{Kind: "openai-deep-thought", Provider: "openai"}, `researchAgents["x"].kind "openai-deep-thought" must be one of`},
		{config.ResearchAgent{Kind: agent.KindExa, Provider: "exa"}, `researchAgents["x"].provider "exa" is not a configured provider`},
		{config.ResearchAgent{Kind: agent.KindExa, Provider: "openai", PriceUSD: config.AgentPrice{High: -1}}, `researchAgents["x"].priceUSD: prices cannot be negative`},
	} {
		g := parseExample(t)
		g.ResearchAgents["x"] = tc.ra
		if err := g.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.ra, err, tc.want)
		}
	}

	// A webhook secret is resolved like every secret, and missing it is named.
	g := parseExample(t)
	ra := g.ResearchAgents["deep-research"]
	ra.WebhookSecretEnv = "OPENAI_WEBHOOK_SECRET"
	g.ResearchAgents["deep-research"] = ra
	err = g.Resolve(config.MapLookup(exampleSecrets))
	if err == nil || !strings.Contains(err.Error(), "OPENAI_WEBHOOK_SECRET") || !strings.Contains(err.Error(), `researchAgents["deep-research"] webhook secret`) {
		t.Fatalf("missing webhook secret: %v", err)
	}
	secrets := map[string]string{"OPENAI_WEBHOOK_SECRET": "whsec_x"}
	for k, v := range exampleSecrets {
		secrets[k] = v
	}
	if err := g.Resolve(config.MapLookup(secrets)); err != nil || g.ResearchAgents["deep-research"].WebhookSecret != "whsec_x" {
		t.Fatalf("resolved %v %q", err, g.ResearchAgents["deep-research"].WebhookSecret)
	}
}
