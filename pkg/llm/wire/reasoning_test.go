package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The recorded Anthropic answer's thinking block (with its signature) survives the
// chain's whole path byte for byte: decoded from the model's answer, stored in the
// chain's Chat assistant message, read back from the next hop's Chat request and
// encoded for the model, first in the assistant turn, before the tool_use.
func TestAnthropicThinkingRoundTripsThroughTheChain(t *testing.T) {
	var recorded struct {
		Content []map[string]any `json:"content"`
	}
	raw := fixtures.Read("anthropic/pydantic-pause-turn.0.response.json")
	json.Unmarshal(raw, &recorded)
	want := recorded.Content[0]
	if want["type"] != "thinking" || want["signature"] == "" {
		t.Fatalf("fixture's first block is %v", want["type"])
	}
	answer, err := wire.AnthropicModel.DecodeResponse(raw)
	if err != nil {
		t.Fatal(err)
	}
	// The hop also called a client tool (as a search-loop hop calls web_search).
	answer.Content = append(answer.Content, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "toolu_1", Name: "web_search", Arguments: `{"query":"q"}`}})
	msg, _, _ := wire.ChatAnswer(answer)
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "user", "content": "hi"}, json.RawMessage(msg),
		map[string]any{"role": "tool", "tool_call_id": "toolu_1", "content": "results"},
	}, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "web_search", "parameters": map[string]any{"type": "object"}}}},
		"searchfleet_reasoning": map[string]any{"budget_tokens": 4096}})
	req, err := wire.Chat.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := wire.AnthropicModel.EncodeRequest(req, "claude")
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Thinking  map[string]any `json:"thinking"`
		MaxTokens int            `json:"max_tokens"`
		Messages  []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(out, &sent)
	if sent.Thinking["type"] != "enabled" || sent.Thinking["budget_tokens"] != 4096.0 || sent.MaxTokens <= 4096 {
		t.Errorf("thinking %v, max_tokens %d", sent.Thinking, sent.MaxTokens)
	}
	a := sent.Messages[1]
	if a.Role != "assistant" || len(a.Content) < 2 {
		t.Fatalf("assistant turn %+v", a)
	}
	got := a.Content[0]
	if got["type"] != "thinking" || got["thinking"] != want["thinking"] || got["signature"] != want["signature"] {
		t.Errorf("the thinking block came back altered: %v", got)
	}
	if last := a.Content[len(a.Content)-1]; last["type"] != "tool_use" {
		t.Errorf("the assistant turn does not end with its tool_use: %v", a.Content)
	}
}

// A Responses reasoning item comes back as it went out, before its function_call, and
// the request asks for its encrypted content; an Anthropic thinking budget becomes a
// Responses effort, and a Gemini thinkingConfig.
func TestReasoningAcrossProtocols(t *testing.T) {
	answer, err := wire.ResponsesModel.DecodeResponse([]byte(`{"object":"response","id":"resp_1","status":"completed","output":[
		{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Thinking."}],"encrypted_content":"gAAAA=="},
		{"type":"function_call","id":"fc_1","call_id":"call_1","name":"web_search","arguments":"{\"query\":\"q\"}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	msg, _, _ := wire.ChatAnswer(answer)
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "user", "content": "hi"}, json.RawMessage(msg),
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "results"},
	}, "searchfleet_reasoning": map[string]any{"budget_tokens": 20000}})
	req, err := wire.Chat.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := wire.ResponsesModel.EncodeRequest(req, "gpt-5")
	s := string(out)
	item := `{"encrypted_content":"gAAAA==","id":"rs_1","summary":[{"text":"Thinking.","type":"summary_text"}],"type":"reasoning"}`
	if !strings.Contains(s, item+`,{"arguments"`) || !strings.Contains(s, `"include":["reasoning.encrypted_content"]`) || !strings.Contains(s, `"reasoning":{"effort":"high"}`) {
		t.Errorf("Responses request %s", s)
	}
	g, _ := wire.GeminiModel.EncodeRequest(req, "gemini-2.5-pro")
	if !strings.Contains(string(g), `"thinkingConfig":{"thinkingBudget":20000}`) || strings.Contains(string(g), "rs_1") {
		t.Errorf("Gemini request %s", g)
	}
	g3, _ := wire.GeminiModel.EncodeRequest(req, "gemini-3-pro-preview")
	if !strings.Contains(string(g3), `"thinkingLevel":"high"`) {
		t.Errorf("Gemini 3 request %s", g3)
	}
}

// A Messages request's thinking is the request's reasoning settings, not a note that
// it is not honoured; a thinking block in its history is kept verbatim.
func TestMessagesThinkingIsHonoured(t *testing.T) {
	req, err := wire.Anthropic.DecodeRequest([]byte(`{"model":"m","max_tokens":9000,"thinking":{"type":"enabled","budget_tokens":8000},"messages":[
		{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"x"}]},
		{"role":"user","content":"more"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Reasoning == nil || req.Reasoning.BudgetTokens != 8000 || len(req.AllNotes()) != 0 {
		t.Fatalf("reasoning %+v, notes %v", req.Reasoning, req.AllNotes())
	}
	p := req.Messages[1].Parts
	if p[0].Reasoning == nil || p[0].Reasoning.Signature != "s" || p[1].Reasoning == nil || p[1].Reasoning.Redacted != "d" {
		t.Fatalf("assistant parts %+v", p)
	}
	if _, err := wire.Anthropic.DecodeRequest([]byte(`{"model":"m","max_tokens":9000,"thinking":{"type":"enabled","budget_tokens":10},"messages":[{"role":"user","content":"hi"}]}`)); err == nil {
		t.Error("a budget under 1,024 was accepted")
	}
}
