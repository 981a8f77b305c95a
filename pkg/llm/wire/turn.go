package wire

import (
	"encoding/json"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Turn is one model answer as the chain keeps it between hops, in canonical form: the
// parts the next hop sends back to the model, in the order the model wrote them
// (reasoning state with its signatures where the model gave it, text, client and
// server tool calls), and what the job record reads of it. A provider's own searches
// are folded in: their citations become [n] markers in the text, and Native reports
// them; their call and result blocks are not sent back.
type Turn struct {
	Parts []Part `json:"parts"`
	// Stop is why the answer ended.
	Stop StopReason `json:"stop,omitempty"`
	// Paused is set when the answer was still going when its continuations ran out.
	Paused bool      `json:"paused,omitempty"`
	Usage  llm.Usage `json:"usage"`
	// Model is the model that answered, as the answer names it.
	Model string `json:"model,omitempty"`
	// Native is the provider's own search in this answer (nil: none ran).
	Native *llm.NativeSearch `json:"native,omitempty"`
}

// TurnOf is the turn the chain keeps of a model's answer.
func TurnOf(r *Response) *Turn {
	t := &Turn{Stop: r.Stop, Paused: r.Paused, Model: r.Model,
		Usage: llm.Usage{PromptTokens: r.Usage.InputTokens, CompletionTokens: r.Usage.OutputTokens, TotalTokens: r.Usage.InputTokens + r.Usage.OutputTokens}}
	native := nativeSearch(r)
	for _, p := range r.Content {
		switch p.Kind {
		case PartText:
			text := p.Text
			if native != nil {
				text = native.mark(p)
			}
			if text != "" {
				t.Parts = append(t.Parts, Part{Kind: PartText, Text: text})
			}
		case PartToolCall, PartReasoning:
			t.Parts = append(t.Parts, p)
		}
	}
	if native != nil {
		native.attribute()
		native.Unfinished = r.Paused // still searching when its rounds ran out
		t.Native = &native.NativeSearch
	}
	return t
}

// Text is the turn's text parts joined.
func (t *Turn) Text() string { return JoinText(t.Parts) }

// Calls are the turn's tool calls, in order.
func (t *Turn) Calls() []ToolCall {
	var out []ToolCall
	for _, p := range t.Parts {
		if p.Kind == PartToolCall && p.Call != nil {
			out = append(out, *p.Call)
		}
	}
	return out
}

// ChatMessage renders the turn as a Chat assistant message (text content, tool_calls
// with the model's ids, its reasoning as a Chat client reads it) and its
// finish_reason. The native search report is left out: the job record keeps it.
func (t *Turn) ChatMessage() (msg map[string]any, finish string) {
	var calls []llm.ToolCall
	for _, c := range t.Calls() {
		calls = append(calls, c.Chat())
	}
	text := t.Text()
	msg = map[string]any{"role": "assistant", "content": text}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		if text == "" {
			msg["content"] = nil
		}
	}
	// The reasoning_content a Chat model reads; another protocol's state under
	// llm.ReasoningKey.
	content, entries := ChatReasoningValues(t.Parts)
	if content != nil {
		msg["reasoning_content"] = *content
	}
	if entries != nil {
		msg[llm.ReasoningKey] = entries
	}
	finish = ChatFinish[t.Stop]
	if len(calls) > 0 {
		finish = "tool_calls"
	} else if finish == "" || finish == "tool_calls" {
		finish = "stop"
	}
	return msg, finish
}

// Chat is the call as a Chat assistant message's tool call.
func (c ToolCall) Chat() llm.ToolCall {
	tc := llm.ToolCall{ID: c.ID, Type: "function"}
	tc.Function.Name, tc.Function.Arguments = c.Name, c.Arguments
	return tc
}

// ChatTool reads a Chat function tool ({"type":"function","function":{…}}).
func ChatTool(raw json.RawMessage) (Tool, error) {
	var t struct {
		Function Tool `json:"function"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tool{}, err
	}
	return t.Function, nil
}
