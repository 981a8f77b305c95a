package wire_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// thinkingAnswer is a DeepSeek/Kimi thinking model's tool-call answer
// (WIRE_FORMATS.md: reasoning_content next to tool_calls).
const thinkingAnswer = `{"id":"c1","model":"deepseek-reasoner","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"","reasoning_content":"The user wants news; I should search.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"web_search","arguments":"{\"query\":\"nats\"}"}}]}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`

// A Chat thinking model's reasoning_content survives the chain's path: decoded from
// its answer, kept in the chain's assistant message and sent back on the assistant
// message with the tool_calls it led to; another protocol's reasoning state never
// reaches a Chat model, nor does the fleet's own field.
func TestChatModelKeepsReasoningContent(t *testing.T) {
	answer, err := openaichat.Model.DecodeResponse([]byte(thinkingAnswer))
	if err != nil {
		t.Fatal(err)
	}
	if answer.Stop != wire.StopToolUse || countKind(answer, wire.PartReasoning) != 1 || countKind(answer, wire.PartToolCall) != 1 || answer.Usage.InputTokens != 10 {
		t.Fatalf("decoded %+v", answer)
	}
	msg, _, _ := wire.ChatAnswer(answer)
	anthropic := `{"role":"assistant","content":"earlier","searchfleet_reasoning":[{"protocol":"anthropic.messages","text":"t","signature":"sig"}]}`
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
		json.RawMessage(`{"role":"user","content":"hi"}`), json.RawMessage(anthropic), json.RawMessage(`{"role":"user","content":"news?"}`),
		json.RawMessage(msg), map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "results"},
	}, "searchfleet_reasoning": map[string]any{"budget_tokens": 16384}, "max_completion_tokens": 900})
	req, err := openaichat.Client.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := openaichat.Model.EncodeRequest(req, "deepseek-reasoner")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "searchfleet") || strings.Contains(string(out), "sig") {
		t.Errorf("the fleet's fields or another protocol's state reached the model: %s", out)
	}
	var sent struct {
		Effort    string `json:"reasoning_effort"`
		MaxTokens *int   `json:"max_tokens"`
		MaxComp   int    `json:"max_completion_tokens"`
		Stream    bool   `json:"stream"`
		Messages  []struct {
			Role             string           `json:"role"`
			ReasoningContent *string          `json:"reasoning_content"`
			ToolCalls        []map[string]any `json:"tool_calls"`
		} `json:"messages"`
	}
	json.Unmarshal(out, &sent)
	if sent.Effort != "high" || sent.MaxTokens != nil || sent.MaxComp != 900 || sent.Stream {
		t.Errorf("effort %q, max_tokens %v, max_completion_tokens %d, stream %v", sent.Effort, sent.MaxTokens, sent.MaxComp, sent.Stream)
	}
	if len(sent.Messages) != 5 {
		t.Fatalf("%d messages: %s", len(sent.Messages), out)
	}
	if m := sent.Messages[1]; m.ReasoningContent != nil {
		t.Errorf("Anthropic thinking went to a Chat model as %q", *m.ReasoningContent)
	}
	if m := sent.Messages[3]; m.ReasoningContent == nil || *m.ReasoningContent != "The user wants news; I should search." || len(m.ToolCalls) != 1 {
		t.Errorf("the tool-call turn went back as %+v", m)
	}
	req.Stream = true
	out, _ = openaichat.Model.EncodeRequest(req, "m")
	if !strings.Contains(string(out), `"stream_options":{"include_usage":true}`) {
		t.Errorf("a streamed request does not ask for usage: %s", out)
	}
}

// A streamed Chat answer decodes to the answer the whole one does: reasoning_content
// and tool-call fragments assembled, the text passed on as it comes.
func TestChatModelStreamMatchesWhole(t *testing.T) {
	sse := strings.Join([]string{
		`data: {"id":"c1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"The user wants news; "}}]}`,
		`data: {"id":"c1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"reasoning_content":"I should search."}}]}`,
		`data: {"id":"c1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":""}}]}`,
		`data: {"id":"c1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"web_search","arguments":"{\"query\""}}]}}]}`,
		`data: {"id":"c1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"nats\"}"}}]},"finish_reason":"tool_calls"}]}`,
		`data: {"id":"c1","model":"deepseek-reasoner","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
		"", ""}, "\n\n")
	text, streamed := decodeStream(t, openaichat.Model, []byte(sse), false)
	whole, _ := openaichat.Model.DecodeResponse([]byte(thinkingAnswer))
	if text != "" || !reflect.DeepEqual(streamed, whole) {
		t.Errorf("streamed %+v (text %q)\nwhole %+v", streamed, text, whole)
	}
	cut := openaichat.Model.NewStreamDecoder()
	cut.Event("", []byte(`{"choices":[{"index":0,"delta":{"content":"half"}}]}`))
	var le *llm.Error
	if _, err := cut.Response(); !errors.As(err, &le) || !le.Retryable() {
		t.Errorf("a cut stream: %v", err)
	}
}

// An error inside a 200 (OpenRouter) is the provider's error; the recorded Kimi
// search round decodes to its builtin call and usage.
func TestChatModelDecodes(t *testing.T) {
	_, err := openaichat.Model.DecodeResponse([]byte(`{"error":{"message":"Provider returned error","code":429}}`))
	var le *llm.Error
	if !errors.As(err, &le) || le.Status != http.StatusTooManyRequests || !le.Retryable() {
		t.Errorf("in-band error: %v", err)
	}
	r, err := openaichat.Model.DecodeResponse(fixtures.Read("moonshot/hermoonshotes-round1-tool-calls.response.json"))
	if err != nil || r.Stop != wire.StopToolUse || countKind(r, wire.PartToolCall) != 1 || r.Content[0].Call.Name != "$web_search" || r.Usage.InputTokens != 178 {
		t.Errorf("Kimi round 1: %+v, %v", r, err)
	}
	if e := openaichat.Model.DecodeError(400, []byte(`{"error":{"message":"bad tool","type":"invalid_request_error","code":"x"}}`)); e.Status != 400 || e.Message != "bad tool" || e.Code != "x" {
		t.Errorf("error envelope: %+v", e)
	}
}

// A Kimi round that only searched pauses (its $web_search calls are the provider's
// searches, not calls for the chain) and is echoed; what it said before searching is
// a paragraph of its own before the next round's text, whose links are cited.
func TestKimiRoundsJoin(t *testing.T) {
	round1 := `{"id":"r1","model":"kimi","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Let me search.",` +
		`"tool_calls":[{"id":"t-1","type":"builtin_function","function":{"name":"$web_search","arguments":"{\"search_result\":{\"search_id\":\"x\"}}"}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`
	round2 := `{"id":"r2","model":"kimi","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"It is [Go](https://go.dev/)."}}],"usage":{"prompt_tokens":5,"completion_tokens":6}}`
	first, err := openaichat.Kimi.DecodeResponse([]byte(round1))
	if err != nil || !first.Paused || countKind(first, wire.PartServerCall) != 1 || countKind(first, wire.PartToolCall) != 0 {
		t.Fatalf("round 1: %+v, %v", first, err)
	}
	next, paused := openaichat.Kimi.Continue([]byte(`{"model":"kimi","messages":[{"role":"user","content":"q"}]}`), []byte(round1))
	if !paused || !strings.Contains(string(next), `{"content":"{\"search_result\":{\"search_id\":\"x\"}}","name":"$web_search","role":"tool","tool_call_id":"t-1"}`) {
		t.Fatalf("echo %s", next)
	}
	last, _ := openaichat.Kimi.DecodeResponse([]byte(round2))
	msg, finish, usage := wire.ChatAnswer(first.Join(last))
	var m struct {
		Content string            `json:"content"`
		Native  *llm.NativeSearch `json:"searchfleet_native"`
	}
	json.Unmarshal(msg, &m)
	if m.Content != "Let me search.\n\nIt is [Go](https://go.dev/)[1]." || finish != "stop" || usage.PromptTokens != 8 {
		t.Errorf("answer %q (%s, %+v)", m.Content, finish, usage)
	}
	if n := m.Native; n == nil || n.Requests != 1 || len(n.Sources) != 1 || len(n.Searches) != 1 || len(n.Searches[0].URLs) != 1 || n.Unfinished {
		t.Errorf("report %+v", m.Native)
	}
}
