package enginecheck

import (
	"cmp"
	"context"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// ModelFixtures are the documented answer of a main model of each protocol.
var ModelFixtures = map[string]string{
	upstream.ModelOpenAIChat:        "openai/pydantic-chat-search-preview.response.json",
	upstream.ModelOpenAIResponses:   "openai/pydantic-responses-web-search-turn2.response.json",
	upstream.ModelAnthropicMessages: "anthropic/pydantic-web-search-mexico-turn2.response.json",
	upstream.ModelGemini:            "gemini/pydantic-generate-websearch-mexico.response.json",
	upstream.ModelPerplexityAgent:   "perplexity/docs-shape-agent-web-search.CONSTRUCTED.json",
}

// Model is a configured main model: its client name, its provider (name, protocol,
// base URL, key) and the provider's model.
type Model struct {
	Name, Provider, Protocol, BaseURL, APIKey, Model string
}

// CheckModel makes one short call of model m against its provider over hc (nil:
// http.DefaultClient) and reports on the answer as Check does for an engine (Hits
// stays 0).
func CheckModel(ctx context.Context, m Model, hc *http.Client) Report {
	c, rc := recording(hc)
	return runModel(ctx, m, c, rc)
}

// CheckModelOffline runs the same checks against the protocol's fixture.
func CheckModelOffline(ctx context.Context, m Model) Report {
	name, ok := ModelFixtures[protocolOf(m)]
	if !ok {
		return Report{Engine: m.Name, Kind: "model:" + protocolOf(m), Error: "no fixture for protocol " + protocolOf(m)}
	}
	m.APIKey = cmp.Or(m.APIKey, "offline-check")
	m.BaseURL = cmp.Or(m.BaseURL, "http://offline.invalid")
	c, rc := replaying([]string{name})
	return runModel(ctx, m, c, rc)
}

func protocolOf(m Model) string {
	return cmp.Or(m.Protocol, upstream.ModelOpenAIChat)
}

func runModel(ctx context.Context, m Model, hc *http.Client, rc *recorder) Report {
	rep := Report{Engine: m.Name, Kind: "model:" + protocolOf(m)}
	api, ok := upstream.ModelAPIFor(m.Protocol)
	if !ok {
		rep.Error = "unknown protocol " + m.Protocol
		return rep
	}
	c := upstream.New(api, m.Provider, m.BaseURL, m.APIKey, hc, upstream.Options{})
	req := &wire.Request{Model: m.Model, MaxTokens: 32,
		Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "searchfleet contract check: reply with the word ready."}}}}}
	call, err := c.Prepare(req, false)
	if err == nil {
		_, err = c.Complete(ctx, call, nil)
	}
	rep.observe(rc, []string{ModelFixtures[protocolOf(m)]}, err)
	return rep
}
