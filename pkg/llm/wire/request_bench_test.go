package wire_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// hopRequest is a third hop of a search loop as the chain builds it for a model that
// reasons: a question, then two hops of a web_search call (with the reasoning of the
// model's own protocol p) and the call's results.
func hopRequest(p wire.Protocol) *wire.Request {
	params := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to search for."}},"required":["query"]}`)
	r := &wire.Request{System: "You are helpful.", Tools: []wire.Tool{{Name: "web_search", Description: "Search the web.", Parameters: params}},
		Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "What changed in NATS JetStream this year?"}}}}}
	for h := range 2 {
		id := fmt.Sprintf("call_%d", h)
		rs := &wire.Reasoning{Protocol: p, Text: strings.Repeat("thinking ", 100), Signature: "sig", ID: "rs_1", Encrypted: "enc"}
		r.Messages = append(r.Messages,
			wire.Message{Role: wire.RoleAssistant, Parts: []wire.Part{{Kind: wire.PartReasoning, Reasoning: rs},
				{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: id, Name: "web_search", Arguments: `{"query":"nats jetstream"}`}}}},
			wire.Message{Role: wire.RoleTool, Parts: []wire.Part{{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: id,
				Parts: []wire.Part{{Kind: wire.PartText, Text: strings.Repeat("1. NATS JetStream 2.12 <https://nats.io/blog> adds things.\n", 8)}}}}}})
	}
	return r
}

// BenchmarkModelEncodeRequest is what encoding a reasoning model's third hop costs,
// per model protocol.
func BenchmarkModelEncodeRequest(b *testing.B) {
	for _, c := range []struct {
		name string
		api  wire.ModelAPI
		p    wire.Protocol
	}{
		{"chat", openaichat.Model, wire.OpenAIChat},
		{"responses", responses.Model, wire.OpenAIResponses},
		{"anthropic", anthropic.Model, wire.AnthropicMessages},
		{"gemini", gemini.Model, wire.Gemini},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := hopRequest(c.p)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.api.EncodeRequest(req, "up-model"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeStored is the chat worker's read of a job's stored request, which
// every step of the job pays.
func BenchmarkDecodeStored(b *testing.B) {
	stored, err := wire.EncodeStored(wire.OpenAIChat, hopRequest(wire.OpenAIChat))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.DecodeStored(stored); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeChatRequest is the ingress's read of a client's Chat request into
// canonical form: a system prompt, three turns of a tool call and its result, two
// function tools and sampling settings.
func BenchmarkDecodeChatRequest(b *testing.B) {
	var msgs []string
	msgs = append(msgs, `{"role":"system","content":"You are helpful."}`)
	for i := range 3 {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"Question %d: what changed in NATS JetStream this year?"}]}`, i),
			fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"nats\"}"}}]}`, i),
			fmt.Sprintf(`{"role":"tool","tool_call_id":"call_%d","content":%q}`, i, strings.Repeat("a result line. ", 20)))
	}
	tool := `{"type":"function","function":{"name":"%s","description":"Look things up.","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}`
	body := fmt.Appendf(nil, `{"model":"gpt-x","messages":[%s],"tools":[%s,%s],"temperature":0.2,"max_tokens":512,"stream":false,"tool_choice":"auto"}`,
		strings.Join(msgs, ","), fmt.Sprintf(tool, "lookup"), fmt.Sprintf(tool, "fetch"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openaichat.DecodeRequest(body, nil); err != nil {
			b.Fatal(err)
		}
	}
}
