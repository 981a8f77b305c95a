package openaichat

import (
	"encoding/json"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// reasoningParts reads an assistant message's reasoning: its llm.ReasoningKey
// entries, else its reasoning_content (a Chat model's own).
func reasoningParts(fleet json.RawMessage, content string, parts []wire.Part) []wire.Part {
	var entries []wire.ChatReasoning
	if !wire.IsNull(fleet) && json.Unmarshal(fleet, &entries) == nil && len(entries) > 0 {
		return wire.WithChatReasoning(entries, parts)
	}
	if content == "" {
		return parts
	}
	return append([]wire.Part{{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.OpenAIChat, Text: content}}}, parts...)
}

// reasoningConfig renders a request's reasoning settings in Chat form: an effort
// alone as reasoning_effort, anything more under llm.ReasoningKey (with the effort it
// maps to, for a Chat model).
func reasoningConfig(out wire.TopLevel, c *wire.ReasoningConfig) {
	if c == nil {
		return
	}
	if *c == (wire.ReasoningConfig{Effort: c.Effort}) {
		out.Set("reasoning_effort", c.Effort)
		return
	}
	cc := *c
	cc.Effort = c.EffortOf()
	out.Set(llm.ReasoningKey, cc)
}
