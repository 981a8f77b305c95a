package openaichat_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// mapTools is a Chat request's tools[] as it was rendered before its entries were
// structs: a map per entry and per function.
func mapTools(tools []wire.Tool) []any {
	out := make([]any, 0, len(tools))
	for _, t := range tools {
		fn := map[string]any{"name": t.Name}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		if p := strings.TrimSpace(string(t.Parameters)); p != "" && p != "null" {
			fn["parameters"] = t.Parameters
		}
		if t.Strict != nil {
			fn["strict"] = *t.Strict
		}
		out = append(out, map[string]any{"type": "function", "function": fn})
	}
	return out
}

// A Chat request's tools encode to the bytes they did as maps, whichever of a
// tool's fields are set.
func TestChatToolsBytes(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	tools := []wire.Tool{
		{Name: "web_search", Description: "Search the web <fast> & \"fresh\"", Parameters: json.RawMessage(` {"type": "object", "properties": {"q": {"type": "string"}}} `), Strict: &yes},
		{Name: "get_weather", Parameters: json.RawMessage(`null`), Strict: &no},
		{Name: "noop", Parameters: json.RawMessage(`  `)},
		{Name: "bare"},
	}
	req := &wire.Request{Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "hi"}}}}, Tools: tools}
	for _, codec := range []wire.ModelAPI{openaichat.Model} {
		body, err := codec.EncodeRequest(req, "m")
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(mapTools(tools))
		if err != nil {
			t.Fatal(err)
		}
		if string(top["tools"]) != string(want) {
			t.Errorf("tools\n got %s\nwant %s", top["tools"], want)
		}
	}
}

// BenchmarkChatModelEncodeRequest renders a second hop's Chat request: the
// conversation, the model's search call and its result, and the two server tools.
func BenchmarkChatModelEncodeRequest(b *testing.B) {
	params := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to search for."},"engine":{"type":"string","enum":["brave","google","glm"]},"count":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}`)
	req := &wire.Request{System: "Be brief.", Messages: []wire.Message{
		{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "What changed in Go 1.26?"}}},
		{Role: wire.RoleAssistant, Parts: []wire.Part{{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "call_1", Name: "web_search", Arguments: `{"query":"go 1.26 release notes"}`}}}},
		{Role: wire.RoleTool, Parts: []wire.Part{{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: "call_1", Parts: []wire.Part{{Kind: wire.PartText, Text: strings.Repeat("Go 1.26 adds things [1]. ", 200)}}}}}},
	}, Tools: []wire.Tool{
		{Name: "web_search", Description: "Search the web.", Parameters: params},
		{Name: "web_fetch", Description: "Read a page.", Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`)},
	}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openaichat.Model.EncodeRequest(req, "up-model"); err != nil {
			b.Fatal(err)
		}
	}
}
