package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
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
	answer, err := anthropic.Model.DecodeResponse(raw)
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
	req, err := openaichat.Client.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := anthropic.Model.EncodeRequest(req, "claude")
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
	answer, err := responses.Model.DecodeResponse([]byte(`{"object":"response","id":"resp_1","status":"completed","output":[
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
	req, err := openaichat.Client.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := responses.Model.EncodeRequest(req, "gpt-5")
	s := string(out)
	item := `{"encrypted_content":"gAAAA==","id":"rs_1","summary":[{"text":"Thinking.","type":"summary_text"}],"type":"reasoning"}`
	if !strings.Contains(s, item+`,{"arguments"`) || !strings.Contains(s, `"include":["reasoning.encrypted_content"]`) || !strings.Contains(s, `"reasoning":{"effort":"high"}`) {
		t.Errorf("Responses request %s", s)
	}
	g, _ := gemini.Model.EncodeRequest(req, "gemini-2.5-pro")
	if !strings.Contains(string(g), `"thinkingConfig":{"thinkingBudget":20000}`) || strings.Contains(string(g), "rs_1") {
		t.Errorf("Gemini request %s", g)
	}
	g3, _ := gemini.Model.EncodeRequest(req, "gemini-3-pro-preview")
	if !strings.Contains(string(g3), `"thinkingLevel":"high"`) {
		t.Errorf("Gemini 3 request %s", g3)
	}
}

// A Messages request's thinking is the request's reasoning settings, not a note that
// it is not honoured; a thinking block in its history is kept verbatim.
func TestMessagesThinkingIsHonoured(t *testing.T) {
	req, err := anthropic.Client.DecodeRequest([]byte(`{"model":"m","max_tokens":9000,"thinking":{"type":"enabled","budget_tokens":8000},"messages":[
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
	if _, err := anthropic.Client.DecodeRequest([]byte(`{"model":"m","max_tokens":9000,"thinking":{"type":"enabled","budget_tokens":10},"messages":[{"role":"user","content":"hi"}]}`)); err == nil {
		t.Error("a budget under 1,024 was accepted")
	}
}

// Another model's reasoning reaches a Messages client as blocks it can send back: a
// thinking block of its readable text (Gemini's thought summary, a Chat model's
// reasoning_content, a Responses item's summary) or, with nothing to read, a
// redacted_thinking block; both carry the part, so the client's next turn gives the
// model its reasoning state exactly as it was (and Claude, whose codec renders only
// its own, never sees it). Claude's own blocks stay verbatim.
func TestOtherModelsReasoningReachesMessagesClientsAndComesBack(t *testing.T) {
	t.Parallel()
	own := &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: "claude thinks", Signature: "EqQBCkgIARAB"}
	others := []*wire.Reasoning{
		{Protocol: wire.Gemini, Text: "**Planning** the search"},
		{Protocol: wire.Gemini, Signature: "CiQBcsjafD3Lx"},
		{Protocol: wire.OpenAIChat, Text: "the user wants the weather #sig"},
		{Protocol: wire.OpenAIResponses, ID: "rs_1", Summary: []string{"first", "second"}, Encrypted: "gAAAAAB"},
		{Protocol: wire.OpenAIResponses, ID: "rs_2", Encrypted: "gAAAAAC"},
	}
	answer := &wire.Response{ID: "msg_1", Model: "m", Stop: wire.StopToolUse}
	for _, r := range append([]*wire.Reasoning{own}, others...) {
		answer.Content = append(answer.Content, wire.Part{Kind: wire.PartReasoning, Reasoning: r})
	}
	answer.Content = append(answer.Content, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}})
	b, err := anthropic.Client.EncodeResponse(answer)
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Content []map[string]any `json:"content"`
	}
	json.Unmarshal(b, &msg)
	var types []string
	for _, bl := range msg.Content {
		types = append(types, bl["type"].(string))
	}
	if got := strings.Join(types, ","); got != "thinking,thinking,redacted_thinking,thinking,thinking,redacted_thinking,tool_use" {
		t.Fatalf("blocks %s: %s", got, b)
	}
	if msg.Content[0]["signature"] != own.Signature || msg.Content[1]["thinking"] != others[0].Text || msg.Content[4]["thinking"] != "first\n\nsecond" {
		t.Fatalf("blocks %s", b)
	}

	history, _ := json.Marshal(msg.Content)
	req, err := anthropic.Client.DecodeRequest([]byte(`{"model":"m","max_tokens":9000,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[
		{"role":"user","content":"weather?"},{"role":"assistant","content":` + string(history) + `},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var back []*wire.Reasoning
	for _, p := range req.Messages[1].Parts {
		if p.Kind == wire.PartReasoning {
			back = append(back, p.Reasoning)
		}
	}
	want, _ := json.Marshal(append([]*wire.Reasoning{own}, others...))
	if got, _ := json.Marshal(back); string(got) != string(want) {
		t.Fatalf("reasoning read back\n%s\nwant\n%s", got, want)
	}
	claude, _ := anthropic.Model.EncodeRequest(req, "claude-sonnet-4-5")
	if strings.Count(string(claude), `"type":"thinking"`) != 1 || strings.Contains(string(claude), "redacted_thinking") || strings.Contains(string(claude), "searchfleet:") {
		t.Errorf("Claude was sent another model's reasoning: %s", claude)
	}
	gemini, _ := gemini.Model.EncodeRequest(req, "gemini-3-pro-preview")
	if !strings.Contains(string(gemini), `"thoughtSignature":"CiQBcsjafD3Lx"`) {
		t.Errorf("Gemini did not get its thought signature back: %s", gemini)
	}
}

// A Messages client that did not ask for thinking is not given another model's
// reasoning (a Gemini or OpenAI model reasons unasked); one that asked is.
func TestMessagesClientsAreShownReasoningOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	parts := []wire.Part{
		{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.Gemini, Signature: "sig"}},
		{Kind: wire.PartText, Text: "answer"},
	}
	for _, c := range []struct {
		reasoning *wire.ReasoningConfig
		p         wire.Protocol
		kept      int
	}{
		{nil, wire.AnthropicMessages, 1},
		{&wire.ReasoningConfig{Disabled: true}, wire.AnthropicMessages, 1},
		{&wire.ReasoningConfig{BudgetTokens: 2048}, wire.AnthropicMessages, 2},
		{nil, wire.OpenAIResponses, 2}, // reasoningOutput gives summaries only when asked
	} {
		r := &wire.Response{Content: append([]wire.Part(nil), parts...)}
		r.ShowTo(&wire.Request{Reasoning: c.reasoning}, c.p)
		if len(r.Content) != c.kept {
			t.Errorf("%s, reasoning %+v: %d parts kept, want %d", c.p, c.reasoning, len(r.Content), c.kept)
		}
	}
}

// ReasonsUnasked tells OpenAI's reasoning models by name, as OpenAI's SDKs do.
func TestReasonsUnasked(t *testing.T) {
	for model, want := range map[string]bool{"o3": true, "o4-mini": true, "gpt-5": true, "gpt-5.2-codex": true, "openai/gpt-5-mini": true,
		"codex-mini-latest": true, "gpt-5-chat-latest": false, "gpt-4.1": false, "gpt-4o": false, "omni-moderation": false, "sim-scripted": false} {
		if got := wire.ReasonsUnasked(model); got != want {
			t.Errorf("%s: %v, want %v", model, got, want)
		}
	}
}
