package fleet

import (
	"net/url"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
)

// researchAgents builds the configured research agents: as the research worker and
// the ingress call them, as GET /v1/research/agents lists them, and their webhook
// secrets. OpenAI and Gemini send their webhooks to the project's endpoint (the
// fleet's /v1/research/agents/<name>/webhook, set at the provider); Parallel to the
// URL each run names, which the fleet knows when publicURL is set.
func researchAgents(f *config.File, publicURL string) (map[string]*research.AgentBackend, []research.AgentInfo, map[string]string, error) {
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
		b := &research.AgentBackend{Agent: a, Kind: ra.Kind, Price: price.For}
		if ra.WebhookSecret != "" {
			secrets[name] = ra.WebhookSecret
			switch {
			case ra.Kind == agent.KindOpenAI || ra.Kind == agent.KindGemini:
				b.Webhooks = true
			case ra.Kind == agent.KindParallel && publicURL != "":
				b.Webhook = strings.TrimRight(publicURL, "/") + "/v1/research/agents/" + url.PathEscape(name) + "/webhook"
				b.Webhooks = true
			}
		}
		backends[name] = b
		infos = append(infos, research.AgentInfo{Name: name, Kind: ra.Kind,
			PriceUSD: map[string]float64{"low": price.Low, "medium": price.Medium, "high": price.High, "max": price.Max}, Models: ra.Models})
	}
	return backends, infos, secrets, nil
}
