package fleet

import (
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
)

// researchAgents builds the configured research agents: as the research worker and
// the ingress call them, as GET /v1/research/agents lists them, and their webhook
// secrets.
func researchAgents(f *config.File) (map[string]*research.AgentBackend, []research.AgentInfo, map[string]string, error) {
	backends := map[string]*research.AgentBackend{}
	var infos []research.AgentInfo
	secrets := map[string]string{}
	for _, name := range f.ResearchAgentNames() {
		ra := f.ResearchAgents[name]
		a, err := f.NewResearchAgent(name, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		price := ra.PriceUSD
		// OpenAI sends its webhooks to the project's endpoint (the fleet's
		// /v1/research/agents/<name>/webhook, set in OpenAI's dashboard); Parallel
		// only to a URL named per run, which the fleet does not know of itself.
		backends[name] = &research.AgentBackend{Agent: a, Kind: ra.Kind, Price: price.For,
			Webhooks: ra.WebhookSecret != "" && ra.Kind == agent.KindOpenAI}
		infos = append(infos, research.AgentInfo{Name: name, Kind: ra.Kind,
			PriceUSD: map[string]float64{"low": price.Low, "medium": price.Medium, "high": price.High, "max": price.Max}, Models: ra.Models})
		if ra.WebhookSecret != "" {
			secrets[name] = ra.WebhookSecret
		}
	}
	return backends, infos, secrets, nil
}
