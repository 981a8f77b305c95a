// Package demo builds the zero-setup configuration of `make run`: a scripted main
// model and every engine kind, all answered by the built-in simulator.
package demo

import (
	"encoding/json"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// Model is the model name the demo serves (OpenAI Chat).
const Model = "sim-model"

// The demo's other main models: the same scripted model, spoken to in each other
// main-model protocol.
const (
	ModelResponses = "sim-responses" // openai-responses
	ModelClaude    = "sim-claude"    // anthropic-messages
	ModelGemini    = "sim-gemini"    // gemini
	// ModelPerplexity is the scripted model behind Perplexity's Agent API
	// (perplexity-agent, POST /v1/agent), named provider/model as the Agent API names
	// its models.
	ModelPerplexity = "sim-perplexity"
	// ModelClaudeNative is sim-claude searching with Anthropic's own web_search
	// (webSearch "native"): the simulator answers in the recorded native answer's shape,
	// from pages it makes from the question.
	ModelClaudeNative = "sim-claude-native"
	// ModelResponsesNative and ModelGeminiNative search with OpenAI's web_search tool
	// and Gemini's grounding with Google Search, answered in the recorded answers'
	// shapes from pages made from the question.
	ModelResponsesNative = "sim-responses-native"
	ModelGeminiNative    = "sim-gemini-native"
	// ModelKimiNative is the scripted model behind a provider of kind kimi, searching
	// with Kimi's own $web_search (webSearch "native"): the simulator plays the
	// recorded round trip (the call, the echo, the answer with markdown links to pages
	// made from the question).
	ModelKimiNative = "sim-kimi-native"
	// ModelGLMNative is the scripted model behind a provider of kind glm, searching
	// with GLM's own web_search tool: the simulator answers with GLM's answer shape
	// (ref_N markers, the top-level web_search results).
	ModelGLMNative = "sim-glm-native"
)

// KeyEnv is the variable every simulated provider names for its key. Config resolves
// it to Key itself (the simulator accepts any key), so the demo needs nothing set;
// fleet processes that load the demo's JSON from a file need KeyEnv set to anything.
const KeyEnv = "SIM_API_KEY"

// Key is the key the demo's providers and engines are resolved with.
const Key = "sim-key"

// Lookup resolves every secret variable to Key: with it, config.File.Resolve fills a
// demo-based file (tenants added by tests included) with no environment. It sets none
// of the FLEET_ settings (such as the base URL overrides FLEET_PROVIDER_<ID>_BASE_URL).
func Lookup(name string) (string, bool) {
	if strings.HasPrefix(name, "FLEET_") {
		return "", false
	}
	return Key, true
}

var descriptions = map[string]string{
	"glm-chat":   "GLM-4.7 with web search – better for Chinese / domestic news",
	"gemini":     "Gemini with Google Search grounding – broader global web coverage",
	"openai":     "OpenAI Responses web_search",
	"anthropic":  "Claude web_search",
	"kimi":       "Kimi $web_search",
	"perplexity": "Perplexity Agent API web_search",
	"openrouter": "OpenRouter web search",
	"glm-api":    "Zhipu web search API (raw results)",
	"brave":      "Brave Search API (raw results)",
	"tavily":     "Tavily search API (raw results)",
	"searxng":    "SearXNG metasearch (raw results)",
	"exa":        "Exa neural search (raw results)",
	"serper":     "Serper Google results (raw results)",
	"cloudflare": "Cloudflare Web Search, Ceramic index (raw results)",
	"parallel":   "Parallel Search (raw results)",
	"linkup":     "Linkup search (raw results)",

	"perplexity-search": "Perplexity Search API (raw results)",
}

// ids renames two kinds to the seed's engine ids.
var ids = map[string]string{"glm-chat": "glm", "gemini": "google"}

// Config is the demo configuration for a simulator at simURL serving engineCfgs (its
// EngineConfigs), its secrets resolved with Lookup. GLM is configured the seed's way,
// through a provider key listed in routing.web_search; the others by kind.
func Config(simURL string, engineCfgs []engines.Config) *config.File {
	f := &config.File{
		Providers: map[string]config.Provider{
			"sim":   {Kind: "openai", BaseURL: simURL + "/v1", APIKeyEnv: KeyEnv},
			"zhipu": {Kind: "glm", SearchBaseURL: simURL + "/glm-chat", APIKeyEnv: KeyEnv},
			// The simulator's main model in the other protocols: the base URL is what
			// each protocol's SDKs take (".../v1" for OpenAI, the host root for the others).
			"sim-responses":  {Kind: "openai", Protocol: "openai-responses", BaseURL: simURL + "/v1", APIKeyEnv: KeyEnv},
			"sim-anthropic":  {Kind: "anthropic", Protocol: "anthropic-messages", BaseURL: simURL, APIKeyEnv: KeyEnv},
			"sim-gemini":     {Kind: "gemini", Protocol: "gemini", BaseURL: simURL, APIKeyEnv: KeyEnv},
			"sim-perplexity": {Kind: "perplexity", Protocol: "perplexity-agent", BaseURL: simURL, APIKeyEnv: KeyEnv},
			"sim-kimi":       {Kind: "kimi", BaseURL: simURL + "/v1", APIKeyEnv: KeyEnv},
			"sim-glm":        {Kind: "glm", BaseURL: simURL + "/v1", APIKeyEnv: KeyEnv},
		},
		Models: map[string]config.ModelRoute{
			Model:             {Provider: "sim", Model: "sim-scripted"},
			ModelResponses:    {Provider: "sim-responses", Model: "sim-scripted"},
			ModelClaude:       {Provider: "sim-anthropic", Model: "sim-scripted"},
			ModelGemini:       {Provider: "sim-gemini", Model: "sim-scripted"},
			ModelPerplexity:   {Provider: "sim-perplexity", Model: "perplexity/sim-scripted"},
			ModelClaudeNative: {Provider: "sim-anthropic", Model: "sim-scripted", WebSearch: "native"},

			ModelResponsesNative: {Provider: "sim-responses", Model: "sim-scripted", WebSearch: "native"},
			ModelGeminiNative:    {Provider: "sim-gemini", Model: "sim-scripted", WebSearch: "native"},
			ModelKimiNative:      {Provider: "sim-kimi", Model: "sim-scripted", WebSearch: "native"},
			ModelGLMNative:       {Provider: "sim-glm", Model: "sim-scripted", WebSearch: "native"},
		},
		Routing:   config.Routing{WebSearch: []config.Route{{ID: "web-search-backends", Priority: 200, Targets: []string{"zhipu.glm-4.7"}}}},
		WebSearch: config.WebSearch{InjectPolicy: "selective"},
	}
	for _, c := range engineCfgs {
		id := c.ID
		if v, ok := ids[c.Kind]; ok {
			id = v
		}
		e := config.EngineEntry{ID: id, Description: descriptions[c.Kind]}
		switch c.Kind {
		case "glm-chat":
			e.ProviderKey = "zhipu.glm-4.7"
		case "gemini":
			e.Default = true
		}
		if c.Kind == "glm-chat" || c.Kind == "kimi" {
			e.Languages = []string{"zh"} // a Chinese query the model leaves to the fleet goes here
		}
		if c.Kind != "glm-chat" {
			e.Kind, e.BaseURL, e.Model, e.APIKeyEnv = c.Kind, c.BaseURL, c.Model, c.APIKeyEnv
			if len(c.Options) > 0 {
				e.Options = json.RawMessage(c.Options)
			}
		}
		f.WebSearch.Engines = append(f.WebSearch.Engines, e)
	}
	addResearchAgents(f, simURL)
	_ = f.Resolve(Lookup) // cannot fail: Lookup answers every variable
	return f
}

// researchAgentPrices are the demo agents' expected prices per run (low, medium,
// high, max): OpenAI's and Exa's in line with what the simulator reports, Parallel's
// its processors' list prices (base, core, pro, ultra), Gemini's (which reports no
// cost) a round guess.
var researchAgentPrices = map[string]config.AgentPrice{
	"openai-deep-research": {Low: 1, Medium: 3, High: 6, Max: 10},
	"gemini-deep-research": {Low: 2, Medium: 2, High: 2, Max: 5},
	"perplexity-agent":     {Low: 0.05, Medium: 0.2, High: 0.5, Max: 1.2},
	"parallel-task":        {Low: 0.01, Medium: 0.025, High: 0.1, Max: 0.3},
	"exa-agent":            {Low: 0.1, Medium: 0.3, High: 1, Max: 5},
}

// researchAgentModels are the Responses model names that run an agent: OpenAI's deep
// research models run the openai-deep-research agent, as at OpenAI.
var researchAgentModels = map[string][]string{agent.KindOpenAI: {"o3-deep-research", "o4-mini-deep-research"}}

// addResearchAgents configures every research agent kind, named after its kind,
// against the simulator, each through a provider of its own ("sim-<kind>") whose kind
// is the agent kind's first word ("openai" for openai-deep-research).
func addResearchAgents(f *config.File, simURL string) {
	f.ResearchAgents = map[string]config.ResearchAgent{}
	for _, kind := range agent.Kinds {
		p := "sim-" + kind
		provider, _, _ := strings.Cut(kind, "-")
		f.Providers[p] = config.Provider{Kind: provider, BaseURL: simulator.AgentBaseURL(simURL, kind), APIKeyEnv: KeyEnv}
		f.ResearchAgents[kind] = config.ResearchAgent{Kind: kind, Provider: p, PriceUSD: researchAgentPrices[kind], Models: researchAgentModels[kind]}
	}
}
