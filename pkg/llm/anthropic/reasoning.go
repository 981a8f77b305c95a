package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// thinkingConfig reads a Messages request's thinking: enabled with budget_tokens,
// adaptive, or disabled. A Messages client that asks for thinking is shown it: every model is asked for its
// reasoning in words (Summary auto: a Responses model's summary, Gemini's
// includeThoughts), which the answer gives as thinking blocks (thinkingBlock).
func thinkingConfig(v json.RawMessage) (*wire.ReasoningConfig, error) {
	var t struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	}
	if json.Unmarshal(v, &t) != nil {
		return nil, wire.Invalid("thinking", "thinking: Input should be an object")
	}
	switch t.Type {
	case "enabled":
		if t.BudgetTokens < 1024 {
			return nil, wire.Invalid("thinking.budget_tokens", "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		}
		return &wire.ReasoningConfig{BudgetTokens: t.BudgetTokens, Summary: "auto"}, nil
	case "adaptive":
		return &wire.ReasoningConfig{Adaptive: true, Summary: "auto"}, nil
	case "disabled":
		return &wire.ReasoningConfig{Disabled: true}, nil
	}
	return nil, wire.Invalid("thinking.type", "thinking.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'", t.Type)
}

// clientThinkingBlock renders a reasoning part for a Messages client (nil: nothing to
// give). Claude's is its block, verbatim. Another model's reasoning becomes a thinking
// block of its readable text (a Responses item's summary, Gemini's thought summary, a
// Chat model's reasoning_content) or, with nothing to read (a Gemini thought
// signature, an encrypted Responses item), a redacted_thinking block; either carries
// the part itself (carryReasoning), so that a client that sends its blocks back, as
// Anthropic asks clients to, gives that model its own reasoning state on the next turn.
func clientThinkingBlock(p wire.Part) map[string]any {
	if b := thinkingBlock(p); b != nil || p.Kind != wire.PartReasoning || p.Reasoning == nil {
		return b
	}
	r := p.Reasoning
	switch {
	case r.Readable() != "":
		return map[string]any{"type": "thinking", "thinking": r.Readable(), "signature": carryReasoning(r)}
	case r.Signature != "" || r.Encrypted != "":
		return map[string]any{"type": "redacted_thinking", "data": carryReasoning(r)}
	}
	return nil
}

// thinkingAfterText moves the thinking blocks that come from index base on, before the
// first text block, to index at: a stream that already sent text from base on (the
// text streamed as the model wrote it, before its thinking was known) sends them
// after what it sent.
func thinkingAfterText(blocks []map[string]any, base, at int) []map[string]any {
	var thinking, rest []map[string]any
	text := false
	for i, b := range blocks {
		t := b["type"]
		text = text || i >= base && t == "text"
		if i >= base && !text && (t == "thinking" || t == "redacted_thinking") {
			thinking = append(thinking, b)
			continue
		}
		rest = append(rest, b)
	}
	if len(thinking) == 0 {
		return blocks
	}
	at = min(at, len(rest))
	out := append(append([]map[string]any(nil), rest[:at]...), thinking...)
	return append(out, rest[at:]...)
}

// thinkingBlock renders Claude's reasoning part as its block, verbatim (nil: the part
// is another protocol's, which Claude cannot take: it has no signature Anthropic
// accepts).
func thinkingBlock(p wire.Part) map[string]any {
	r, ok := wire.ReasoningFor(p, wire.AnthropicMessages)
	if !ok {
		return nil
	}
	if r.Redacted != "" {
		return map[string]any{"type": "redacted_thinking", "data": r.Redacted}
	}
	return map[string]any{"type": "thinking", "thinking": r.Text, "signature": r.Signature}
}

// carriedPrefix starts the signature (or redacted data) of a thinking block that
// carries another model's reasoning: ':' is not in the base64 of Anthropic's own.
const carriedPrefix = "searchfleet:"

// carryReasoning encodes another model's reasoning part for a Messages client, to come
// back in its thinking block's signature or redacted_thinking data.
func carryReasoning(r *wire.Reasoning) string {
	b, _ := json.Marshal(r)
	return carriedPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// carriedReasoning reads back a reasoning part carryReasoning encoded (nil: opaque is
// Anthropic's own, or not the fleet's encoding).
func carriedReasoning(opaque string) *wire.Reasoning {
	enc, ok := strings.CutPrefix(opaque, carriedPrefix)
	if !ok {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	var r wire.Reasoning
	if err != nil || json.Unmarshal(b, &r) != nil || r.Protocol == wire.AnthropicMessages || r.Protocol == "" {
		return nil
	}
	return &r
}
