package responses

import (
	"encoding/json"
	"fmt"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// reasoningItem renders a Responses reasoning part as the input item it came as (nil:
// the part is another protocol's, or has no encrypted_content: the fleet calls with
// store false, so an item by its id alone is refused, "Items are not persisted when
// `store` is set to false", and is left out as OpenAI's error advises).
func reasoningItem(p wire.Part) map[string]any {
	r, ok := wire.ReasoningFor(p, wire.OpenAIResponses)
	if !ok || r.Encrypted == "" {
		return nil
	}
	summary := make([]map[string]string, 0, len(r.Summary))
	for _, s := range r.Summary {
		summary = append(summary, map[string]string{"type": "summary_text", "text": s})
	}
	it := map[string]any{"type": "reasoning", "summary": summary, "encrypted_content": r.Encrypted}
	if r.ID != "" {
		it["id"] = r.ID
	}
	return it
}

// reasoningConfig sets a Responses request's reasoning (effort, summary) and,
// since the fleet does not store at the provider (store false), asks for the
// reasoning items' encrypted_content, which the next turn sends back.
func reasoningConfig(out wire.TopLevel, r *wire.Request) {
	carried := false
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if _, ok := wire.ReasoningFor(p, wire.OpenAIResponses); ok {
				carried = true
			}
		}
	}
	c := r.Reasoning
	if c == nil && !carried {
		return
	}
	if c != nil {
		rc := map[string]any{}
		if e := c.EffortOf(); e != "" {
			rc["effort"] = e
		}
		if c.Summary != "" {
			rc["summary"] = c.Summary
		}
		if len(rc) > 0 {
			out.Set("reasoning", rc)
		}
		if c.Disabled {
			return
		}
	}
	include, _ := out["include"].([]string)
	out.Set("include", append(include, "reasoning.encrypted_content"))
}

// decodeReasoning reads a Responses request's reasoning: effort and summary.
func decodeReasoning(v json.RawMessage) (*wire.ReasoningConfig, error) {
	var o struct {
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	}
	if json.Unmarshal(v, &o) != nil {
		return nil, wire.Invalid("reasoning", "Invalid type for 'reasoning': expected an object.")
	}
	c := &wire.ReasoningConfig{Effort: o.Effort, Summary: o.Summary}
	if o.Effort == "none" {
		c = &wire.ReasoningConfig{Disabled: true, Summary: o.Summary}
	}
	return c, nil
}

// reasoningOutput renders an answer's reasoning as Responses reasoning output items,
// each {type, id, summary: [{type: summary_text, text}]}: a Responses model's own
// items with their summaries, and, when the client asked for summaries, another
// protocol's readable reasoning (Anthropic thinking, Gemini thoughts, a Chat model's
// reasoning_content) as the summary of an item of its own. When the client asked
// for the encrypted content (SealReasoning), every reasoning part is an item, its
// state sealed as its encrypted_content; otherwise reasoning with nothing to read
// (encrypted, redacted, a signature alone) gives no item, and a model's own
// encrypted_content, which only the fleet can send back to its model, is not given.
func reasoningOutput(r *wire.Response) []map[string]any {
	asked := summaryAsked(r.Echo)
	var out []map[string]any
	for _, p := range r.Content {
		rs := p.Reasoning
		if p.Kind != wire.PartReasoning || rs == nil {
			continue
		}
		texts, id := rs.Summary, rs.ID
		if rs.Protocol != wire.OpenAIResponses {
			texts, id = nil, ""
			if asked && rs.Text != "" {
				texts = []string{rs.Text}
			}
		}
		if len(texts) == 0 && r.Seal == nil {
			continue
		}
		if id == "" {
			id = fmt.Sprintf("rs_%s_%d", wire.IDToken(r.ID), len(out))
		}
		summary := make([]any, 0, len(texts))
		for _, t := range texts {
			summary = append(summary, summaryText(t))
		}
		item := map[string]any{"type": "reasoning", "id": id, "summary": summary}
		if r.Seal != nil {
			item["encrypted_content"] = r.Seal(rs)
		}
		out = append(out, item)
	}
	return out
}

// summaryAsked reports whether a Responses request (its echo) asked for reasoning
// summaries (reasoning.summary auto, concise or detailed).
func summaryAsked(echo map[string]json.RawMessage) bool {
	var rc struct {
		Summary string `json:"summary"`
	}
	return json.Unmarshal(echo["reasoning"], &rc) == nil && rc.Summary != ""
}

func summaryText(text string) map[string]any {
	return map[string]any{"type": "summary_text", "text": text}
}
