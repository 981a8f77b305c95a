package wire_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// decodeStream runs a recorded stream through a model protocol's stream decoder and
// returns the text deltas joined and the answer.
func decodeStream(t *testing.T, api wire.ModelAPI, data []byte, jsonl bool) (string, *wire.Response) {
	t.Helper()
	dec := api.NewStreamDecoder()
	var text strings.Builder
	feed := func(name string, d []byte) error {
		s, err := dec.Event(name, d)
		text.WriteString(s)
		return err
	}
	var err error
	if jsonl {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 8<<20)
		for sc.Scan() && err == nil {
			var ev struct {
				Type string `json:"type"`
			}
			json.Unmarshal(sc.Bytes(), &ev)
			err = feed(ev.Type, sc.Bytes())
		}
	} else {
		err = llm.ReadSSE(bytes.NewReader(data), feed)
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := dec.Response()
	if err != nil {
		t.Fatal(err)
	}
	return text.String(), r
}

func countKind(r *wire.Response, k wire.PartKind) int {
	n := 0
	for _, p := range r.Content {
		if p.Kind == k {
			n++
		}
	}
	return n
}

// Recorded Anthropic answers decode: text blocks with their citations (no offsets),
// the provider's own searches, usage with its web_search_requests, the stop reason;
// thinking blocks are left out.
func TestAnthropicModelDecodesRecordedAnswers(t *testing.T) {
	t.Parallel()
	r, err := anthropic.Model.DecodeResponse(fixtures.Read("anthropic/vercel-web-search-nonstream.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop != wire.StopEndTurn || r.Usage.InputTokens != 27118 || r.Usage.OutputTokens != 600 || r.Usage.WebSearches != 2 {
		t.Errorf("stop %s usage %+v", r.Stop, r.Usage)
	}
	if countKind(r, wire.PartServerCall) != 2 || countKind(r, wire.PartServerResult) != 2 {
		t.Errorf("server parts: %d calls, %d results", countKind(r, wire.PartServerCall), countKind(r, wire.PartServerResult))
	}
	cited := 0
	for _, p := range r.Content {
		for _, c := range p.Citations {
			cited++
			if c.Start != -1 || !strings.HasPrefix(c.URL, "http") {
				t.Errorf("citation %+v", c)
			}
		}
	}
	if cited == 0 || len(r.Text()) != 1874 {
		t.Errorf("%d citations, text of %d bytes", cited, len(r.Text()))
	}
	// In Chat form the provider's searches become [n] markers after each cited block,
	// numbered by first citation, and the native-search report the chat worker reads.
	msg, finish, usage := wire.ChatAnswer(r)
	var m struct {
		Content   string            `json:"content"`
		ToolCalls []any             `json:"tool_calls"`
		Native    *llm.NativeSearch `json:"searchfleet_native"`
	}
	json.Unmarshal(msg, &m)
	if finish != "stop" || m.ToolCalls != nil || usage.TotalTokens != 27718 || m.Native == nil {
		t.Fatalf("Chat answer %s finish %s usage %+v", msg, finish, usage)
	}
	if !strings.Contains(m.Content, "restitution.[1]") || !strings.Contains(m.Content, "real-time web control.[2]") || strings.Contains(m.Content, "[3]") {
		t.Errorf("markers in %q", m.Content)
	}
	if n := m.Native; n.Requests != 2 || len(n.Searches) != 2 || len(n.Searches[0].URLs) != 10 || len(n.Searches[1].URLs) != 0 ||
		len(n.Sources) != 2 || n.Sources[0].URL != "https://acecomments.mu.nu/?post=411647" || n.Sources[0].Title != "Daily Tech News 26 September 2024" {
		t.Errorf("native search %+v", n)
	}
	r, err = anthropic.Model.DecodeResponse(fixtures.Read("anthropic/pydantic-web-search-sf.response.json"))
	if err != nil || r.Text() == "" || r.Usage.WebSearches != 1 || countKind(r, wire.PartText) != 19 {
		t.Fatalf("sf (thinking block, 19 text blocks): %v %d text parts, usage %+v", err, countKind(r, wire.PartText), r.Usage)
	}
}

// The recorded Anthropic streams decode to the same kind of answer, their text
// arriving delta by delta in order: the deltas joined are the answer's text.
func TestAnthropicModelStream(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		jsonl bool
	}{{"anthropic/pydantic-web-search-news-stream.sse", false}, {"anthropic/pydantic-web-search-sf-stream.sse", false}, {"anthropic/vercel-web-search-stream.chunks.jsonl", true}} {
		text, r := decodeStream(t, anthropic.Model, fixtures.Read(c.name), c.jsonl)
		if text == "" || text != r.Text() {
			t.Errorf("%s: deltas %q\nanswer %q", c.name, clipped(text), clipped(r.Text()))
		}
		if r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 || r.Usage.WebSearches == 0 || r.Stop != wire.StopEndTurn || r.ID == "" {
			t.Errorf("%s: usage %+v stop %s id %q", c.name, r.Usage, r.Stop, r.ID)
		}
		if countKind(r, wire.PartServerCall) == 0 || countKind(r, wire.PartServerResult) == 0 {
			t.Errorf("%s: no server parts", c.name)
		}
	}
	// A stream cut before message_stop is an error, retryable.
	dec := anthropic.Model.NewStreamDecoder()
	dec.Event("message_start", []byte(`{"type":"message_start","message":{"id":"msg_1","type":"message","content":[],"usage":{"input_tokens":3}}}`))
	if _, err := dec.Response(); !retryable(err) {
		t.Errorf("cut stream: %v", err)
	}
	// An error event (overloaded) is the provider's error, retryable.
	if _, err := dec.Event("error", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)); !retryable(err) || status(err) != 529 {
		t.Errorf("overloaded event: %v", err)
	}
}

// Recorded Responses answers decode: output_text with url_citation annotations,
// web_search_call items, reasoning skipped; the stream's deltas are the text.
func TestResponsesModelDecodesRecordedAnswers(t *testing.T) {
	t.Parallel()
	r, err := responses.Model.DecodeResponse(fixtures.Read("openai/pydantic-responses-web-search.response.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop != wire.StopEndTurn || r.Usage.InputTokens != 9299 || r.Usage.OutputTokens != 577 || r.Usage.WebSearches != 1 || r.Text() == "" {
		t.Errorf("stop %s usage %+v text %q", r.Stop, r.Usage, clipped(r.Text()))
	}
	r, err = responses.Model.DecodeResponse(fixtures.Read("openai/vercel-responses-web-search-gpt5mini.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range r.Content {
		for _, c := range p.Citations {
			n++
			if got := string([]rune(p.Text)[c.Start:c.End]); !strings.Contains(got, "](") {
				t.Errorf("citation %d..%d spans %q, want the markdown link", c.Start, c.End, got)
			}
		}
	}
	if n != 10 {
		t.Errorf("%d citations, want 10", n)
	}
	for _, name := range []string{"openai/pydantic-responses-web-search-stream.sse", "openai/pydantic-responses-raw-annotations-stream.sse"} {
		text, r := decodeStream(t, responses.Model, fixtures.Read(name), false)
		if text == "" || text != r.Text() || r.Usage.OutputTokens == 0 {
			t.Errorf("%s: deltas %q answer %q usage %+v", name, clipped(text), clipped(r.Text()), r.Usage)
		}
	}
	text, r := decodeStream(t, responses.Model, fixtures.Read("openai/vercel-responses-web-search-stream.chunks.jsonl"), true)
	if text == "" || text != r.Text() {
		t.Errorf("vercel stream: deltas %q answer %q", clipped(text), clipped(r.Text()))
	}
}

// Recorded Gemini answers decode: the text, usage (thinking counted as output, search
// context as input), STOP; the stream's chunks concatenate to the text; a blocked
// prompt and a SAFETY finish are refusals.
func TestGeminiModelDecodesRecordedAnswers(t *testing.T) {
	t.Parallel()
	r, err := gemini.Model.DecodeResponse(fixtures.Read("gemini/pydantic-generate-websearch-sf.response.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop != wire.StopEndTurn || r.Usage.InputTokens != 17+119 || r.Usage.OutputTokens != 201+213 || r.Text() == "" || r.Model != "gemini-2.5-pro" {
		t.Errorf("stop %s usage %+v model %q", r.Stop, r.Usage, r.Model)
	}
	text, sr := decodeStream(t, gemini.Model, fixtures.Read("gemini/pydantic-stream-websearch-sf.sse"), false)
	if text == "" || text != sr.Text() || sr.Stop != wire.StopEndTurn || sr.Usage.OutputTokens == 0 {
		t.Errorf("stream: deltas %q answer %q stop %s", clipped(text), clipped(sr.Text()), sr.Stop)
	}
	_, blocked := decodeStream(t, gemini.Model, fixtures.Read("gemini/firebase-stream-prompt-blocked-safety.sse"), false)
	if blocked.Stop != wire.StopRefusal {
		t.Errorf("blocked prompt: stop %s", blocked.Stop)
	}
	r, err = gemini.Model.DecodeResponse(fixtures.Read("gemini/firebase-finish-reason-safety.json"))
	if err != nil || r.Stop != wire.StopRefusal {
		t.Errorf("safety finish: %v %+v", err, r)
	}
	if _, finish, _ := wire.ChatAnswer(r); finish != "content_filter" {
		t.Errorf("safety finish is Chat %q", finish)
	}
}

// Provider error bodies become *llm.Error values carrying the retry decision: 429 and
// 5xx (Anthropic's 529 overloaded) retry, with Gemini's RetryInfo as the wait; 4xx
// refusals do not.
func TestModelErrorsCarryRetryDecision(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		api    wire.ModelAPI
		status int
		body   []byte
		retry  bool
		after  time.Duration
		msg    string
	}{
		{"gemini 429 RetryInfo", gemini.Model, 429, fixtures.Read("gemini/vercel-429-retry-info.json"), true, 34400 * time.Millisecond, "exceeded your current quota"},
		{"vertex 429", gemini.Model, 429, fixtures.Read("gemini/firebase-vertex-429-quota-exceeded.json"), true, 0, "Quota exceeded"},
		{"gemini 400", gemini.Model, 400, []byte(`{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}`), false, 0, "Invalid JSON payload"},
		{"responses 400", responses.Model, 400, fixtures.Read("openai/vercel-error-tool-choice-not-found-400.json"), false, 0, "Tool choice 'web_search' not found"},
		{"responses 500", responses.Model, 500, []byte(`{"error":{"message":"The server had an error","type":"server_error","code":null}}`), true, 0, "server had an error"},
		{"anthropic 529", anthropic.Model, 529, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`), true, 0, "Overloaded"},
		{"anthropic 429", anthropic.Model, 429, []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`), true, 0, "rate limit"},
		{"anthropic 400", anthropic.Model, 400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`), false, 0, "max_tokens"},
		{"not JSON", anthropic.Model, 502, []byte("<html>bad gateway</html>"), true, 0, "bad gateway"},
	} {
		e := c.api.DecodeError(c.status, c.body)
		if e.Status != c.status || e.Retryable() != c.retry || e.RetryAfter != c.after || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: %+v (retryable %v)", c.name, e, e.Retryable())
		}
	}
}

// chainBody is a hop-2 Chat request as the chat worker builds it: a system prompt, the
// user's question, the model's two parallel calls (web_search and a client tool),
// their results, with the web_search tool and a client tool offered.
const chainBody = `{"model":"up-model","messages":[
 {"role":"system","content":"Be brief."},
 {"role":"user","content":"Search the web for the latest news about NATS JetStream"},
 {"role":"assistant","content":null,"tool_calls":[
   {"id":"call_a","type":"function","function":{"name":"web_search","arguments":"{\"query\":\"NATS JetStream news\"}"}},
   {"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
 {"role":"tool","tool_call_id":"call_a","content":"[1] NATS 2.12 released (https://nats.io/blog/2-12)"},
 {"role":"tool","tool_call_id":"call_b","content":"sunny"}],
 "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
  {"type":"function","function":{"name":"web_search","description":"Search the web","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}],
 "max_tokens":500,"temperature":0.2}`

func encodeChain(t *testing.T, api wire.ModelAPI) map[string]any {
	t.Helper()
	req, err := openaichat.Client.DecodeRequest([]byte(chainBody))
	if err != nil {
		t.Fatal(err)
	}
	b, err := api.EncodeRequest(req, req.Model)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The chain's Chat request becomes an Anthropic request the client codec accepts:
// the tools as {name, description, input_schema}, the calls as tool_use blocks and
// both results as tool_result blocks of one user turn, with the call ids.
func TestAnthropicModelEncodesChain(t *testing.T) {
	t.Parallel()
	out := encodeChain(t, anthropic.Model)
	if out["system"] != "Be brief." || out["max_tokens"] != 500.0 || out["model"] != "up-model" {
		t.Errorf("top level %s", js(out))
	}
	tools := js(out["tools"])
	if !strings.Contains(tools, `{"description":"Search the web","input_schema":{"properties":{"query":{"type":"string"}},"required":["query"],"type":"object"},"name":"web_search"}`) {
		t.Errorf("tools %s", tools)
	}
	msgs := out["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages %s", js(msgs))
	}
	if got := js(msgs[1]); got != `{"content":[{"id":"call_a","input":{"query":"NATS JetStream news"},"name":"web_search","type":"tool_use"},{"id":"call_b","input":{"city":"Paris"},"name":"get_weather","type":"tool_use"}],"role":"assistant"}` {
		t.Errorf("assistant turn %s", got)
	}
	if got := js(msgs[2]); got != `{"content":[{"content":"[1] NATS 2.12 released (https://nats.io/blog/2-12)","tool_use_id":"call_a","type":"tool_result"},{"content":"sunny","tool_use_id":"call_b","type":"tool_result"}],"role":"user"}` {
		t.Errorf("results turn %s", got)
	}
	// The client side of the protocol reads it back to the same conversation.
	b, _ := json.Marshal(out)
	back, err := anthropic.Client.DecodeRequest(b)
	if err != nil || len(back.Tools) != 2 || len(back.Messages) != 3 || back.Messages[2].Parts[1].Result.CallID != "call_b" {
		t.Errorf("client codec reads it as %+v, %v", back, err)
	}
}

// The chain becomes a Responses request: function tools (strict false unless asked),
// function_call and function_call_output items with the call ids, store false.
func TestResponsesModelEncodesChain(t *testing.T) {
	t.Parallel()
	out := encodeChain(t, responses.Model)
	if out["instructions"] != "Be brief." || out["max_output_tokens"] != 500.0 || out["store"] != false {
		t.Errorf("top level %s", js(out))
	}
	if got := js(out["tools"].([]any)[1]); got != `{"description":"Search the web","name":"web_search","parameters":{"properties":{"query":{"type":"string"}},"required":["query"],"type":"object"},"strict":false,"type":"function"}` {
		t.Errorf("web_search tool %s", got)
	}
	want := `[{"content":"Search the web for the latest news about NATS JetStream","role":"user"},` +
		`{"arguments":"{\"query\":\"NATS JetStream news\"}","call_id":"call_a","name":"web_search","type":"function_call"},` +
		`{"arguments":"{\"city\":\"Paris\"}","call_id":"call_b","name":"get_weather","type":"function_call"},` +
		`{"call_id":"call_a","output":"[1] NATS 2.12 released (https://nats.io/blog/2-12)","type":"function_call_output"},` +
		`{"call_id":"call_b","output":"sunny","type":"function_call_output"}]`
	if got := js(out["input"]); got != want {
		t.Errorf("input\n got %s\nwant %s", got, want)
	}
	b, _ := json.Marshal(out)
	if back, err := responses.Client.DecodeRequest(b); err != nil || back.System != "Be brief." || len(back.Tools) != 2 {
		t.Errorf("client codec reads it as %+v, %v", back, err)
	}
}

// The chain becomes a generateContent request: functionDeclarations, model turns with
// functionCall parts and one user turn with both functionResponse parts, each named
// after its call.
func TestGeminiModelEncodesChain(t *testing.T) {
	t.Parallel()
	out := encodeChain(t, gemini.Model)
	if js(out["systemInstruction"]) != `{"parts":[{"text":"Be brief."}]}` || js(out["generationConfig"]) != `{"maxOutputTokens":500,"temperature":0.2}` {
		t.Errorf("top level %s", js(out))
	}
	if got := js(out["tools"]); !strings.Contains(got, `{"functionDeclarations":[{"description":"Weather","name":"get_weather"`) || !strings.Contains(got, `"name":"web_search","parameters":{"properties"`) {
		t.Errorf("tools %s", got)
	}
	want := `[{"parts":[{"text":"Search the web for the latest news about NATS JetStream"}],"role":"user"},` +
		`{"parts":[{"functionCall":{"args":{"query":"NATS JetStream news"},"id":"call_a","name":"web_search"}},{"functionCall":{"args":{"city":"Paris"},"id":"call_b","name":"get_weather"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"id":"call_a","name":"web_search","response":{"result":"[1] NATS 2.12 released (https://nats.io/blog/2-12)"}}},{"functionResponse":{"id":"call_b","name":"get_weather","response":{"result":"sunny"}}}],"role":"user"}]`
	if got := js(out["contents"]); got != want {
		t.Errorf("contents\n got %s\nwant %s", got, want)
	}
}

// Gemini 3 models refuse a replayed function call without a thought signature: the
// first call of each replayed model turn carries Google's sentinel; older models get
// none.
func TestGeminiThoughtSignatureSentinel(t *testing.T) {
	t.Parallel()
	req, err := openaichat.Client.DecodeRequest([]byte(chainBody))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := gemini.Model.EncodeRequest(req, "gemini-3-flash-preview")
	if n := strings.Count(string(b), `"thoughtSignature":"skip_thought_signature_validator"`); n != 1 ||
		!strings.Contains(string(b), `{"functionCall":{"args":{"query":"NATS JetStream news"},"id":"call_a","name":"web_search"},"thoughtSignature":"skip_thought_signature_validator"}`) {
		t.Errorf("gemini-3 request has %d sentinels: %s", n, b)
	}
	if b, _ := gemini.Model.EncodeRequest(req, "gemini-2.5-flash"); strings.Contains(string(b), "thoughtSignature") {
		t.Errorf("gemini-2.5 request has a signature: %s", b)
	}
}

// Gemini function calls without ids get ids that are stable for the same answer and
// distinct within it, and are not sent back to the model (it never saw them).
func TestGeminiCallIDs(t *testing.T) {
	t.Parallel()
	answer := []byte(`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"web_search","args":{"query":"a"}}},{"functionCall":{"name":"web_search","args":{"query":"b"}}}]},"finishReason":"STOP"}],"responseId":"r1"}`)
	r1, _ := gemini.Model.DecodeResponse(answer)
	r2, _ := gemini.Model.DecodeResponse(answer)
	if len(r1.Content) != 2 || r1.Stop != wire.StopToolUse || r1.Content[0].Call.ID == r1.Content[1].Call.ID || r1.Content[0].Call.ID != r2.Content[0].Call.ID {
		t.Fatalf("ids %+v %+v", r1.Content[0].Call, r1.Content[1].Call)
	}
	msg, finish, _ := wire.ChatAnswer(r1)
	if finish != "tool_calls" {
		t.Errorf("finish %s", finish)
	}
	var m struct {
		ToolCalls []llm.ToolCall `json:"tool_calls"`
	}
	json.Unmarshal(msg, &m)
	id := m.ToolCalls[0].ID
	body := `{"model":"g","messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":` + js(m.ToolCalls) +
		`},{"role":"tool","tool_call_id":"` + id + `","content":"r"}]}`
	req, err := openaichat.Client.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := gemini.Model.EncodeRequest(req, "g")
	if strings.Contains(string(b), id) || !strings.Contains(string(b), `"functionResponse":{"name":"web_search","response":{"result":"r"}}`) {
		t.Errorf("request %s", b)
	}
}

func retryable(err error) bool {
	var le *llm.Error
	return errors.As(err, &le) && le.Retryable()
}

func status(err error) int {
	var le *llm.Error
	if errors.As(err, &le) {
		return le.Status
	}
	return 0
}

func clipped(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
