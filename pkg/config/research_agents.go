package config

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/research/agent"
)

// ResearchAgent is a provider's research agent a research run may name
// ({"agent": "<name>"}) instead of being carried out by the fleet:
//
//	"researchAgents": {"deep": {"kind": "openai-deep-research", "provider": "openai",
//	    "model": "o3-deep-research", "priceUSD": {"low": 1, "medium": 3, "high": 6, "max": 10}}}
//
// The agent calls its provider at the provider's baseURL (empty: the kind's production
// API; OpenAI's with /v1, the others the host root, as their SDKs take it) with the
// provider's keys.
type ResearchAgent struct {
	// Kind is one of agent.Kinds: openai-deep-research, gemini-deep-research,
	// perplexity-agent, parallel-task, exa-agent.
	Kind string `json:"kind"`
	// Provider names the entry of providers whose base URL and keys the agent uses.
	Provider string `json:"provider"`
	// Model is the provider's model, agent or processor (empty: chosen by effort).
	Model string `json:"model,omitempty"`
	// Models are model names a Responses request created with background true may
	// name to run this agent ("o3-deep-research"), as OpenAI's deep-research flow does.
	Models []string `json:"models,omitempty"`
	// PriceUSD is what a run is expected to cost at each effort: a run reserves it
	// before it submits and settles at the provider's reported cost, or at it when the
	// provider reports none.
	PriceUSD AgentPrice `json:"priceUSD,omitzero"`
	// WebhookSecretEnv names the variable holding the secret the provider signs its
	// webhooks with (OpenAI's project webhook secret, Parallel's account secret);
	// empty: the agent's runs are polled only.
	WebhookSecretEnv string `json:"webhookSecretEnv,omitempty"`
	// WebhookSecret is filled by Resolve from WebhookSecretEnv; never serialized.
	WebhookSecret string `json:"-"`
}

// AgentPrice is a research agent's expected price per run effort, in USD.
type AgentPrice struct {
	Low    float64 `json:"low,omitempty"`
	Medium float64 `json:"medium,omitempty"`
	High   float64 `json:"high,omitempty"`
	Max    float64 `json:"max,omitempty"`
}

// For is the price at effort (unknown or empty: medium).
func (p AgentPrice) For(effort string) float64 {
	switch effort {
	case "low":
		return p.Low
	case "high":
		return p.High
	case "max":
		return p.Max
	}
	return p.Medium
}

// ResearchAgentNames returns the configured research agents' names, sorted.
func (f *File) ResearchAgentNames() []string { return slices.Sorted(maps.Keys(f.ResearchAgents)) }

// NewResearchAgent builds the named research agent over hc (nil: the agent's default
// client), with its provider's base URL and resolved keys.
func (f *File) NewResearchAgent(name string, hc *http.Client) (agent.Agent, error) {
	ra, ok := f.ResearchAgents[name]
	if !ok {
		return nil, fmt.Errorf("research agent %q is not configured", name)
	}
	p := f.Providers[ra.Provider]
	keys := p.APIKeys
	if len(keys) == 0 && p.APIKey != "" {
		keys = []string{p.APIKey}
	}
	return agent.New(ra.Kind, p.BaseURL, keys, ra.Model, hc)
}

// validateResearchAgents checks the researchAgents section.
func (f *File) validateResearchAgents(bad func(string, ...any)) {
	for _, name := range f.ResearchAgentNames() {
		ra := f.ResearchAgents[name]
		path := fmt.Sprintf("researchAgents[%q]", name)
		if !slices.Contains(agent.Kinds, ra.Kind) {
			bad("%s.kind %q must be one of %s", path, ra.Kind, strings.Join(agent.Kinds, ", "))
		}
		p, ok := f.Providers[ra.Provider]
		switch {
		case !ok:
			bad("%s.provider %q is not a configured provider", path, ra.Provider)
		case p.AccessToken != nil:
			bad("%s.provider %q authenticates with an access token; research agents take API keys (apiKeyEnv)", path, ra.Provider)
		}
		pr := ra.PriceUSD
		if pr.Low < 0 || pr.Medium < 0 || pr.High < 0 || pr.Max < 0 {
			bad("%s.priceUSD: prices cannot be negative", path)
		}
	}
}
