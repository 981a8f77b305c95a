package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// kimiBody is a chain's request offering the fleet's web_search function.
const kimiBody = `{"model":"kimi-k2.5","messages":[{"role":"user","content":"kimi k2.6 code preview user review"}],` +
	`"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}],"tool_choice":{"type":"function","function":{"name":"web_search"}}}`

// replay is a provider that answers the recorded bodies in turn and keeps the
// requests it got.
type replay struct {
	mu       sync.Mutex
	answers  [][]byte
	requests []map[string]json.RawMessage
}

func (p *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req map[string]json.RawMessage
	json.Unmarshal(b, &req)
	p.mu.Lock()
	i := len(p.requests)
	p.requests = append(p.requests, req)
	p.mu.Unlock()
	if i >= len(p.answers) {
		http.Error(w, `{"error":{"message":"no more recorded answers"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(p.answers[i])
}

// nativeCaller is a native-search caller of api over h.
func nativeCaller(t *testing.T, api wire.ModelAPI, h http.Handler) upstreamtest.Chat {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return upstreamtest.Chat{Caller: upstream.New(api, "p", srv.URL, "k", srv.Client(), upstream.Options{NativeSearch: true})}
}

// report reads a message's native-search report.
func report(t *testing.T, msg json.RawMessage) (map[string]json.RawMessage, *llm.NativeSearch) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatal(err)
	}
	var n *llm.NativeSearch
	if raw := m[llm.NativeKey]; raw != nil {
		json.Unmarshal(raw, &n)
	}
	return m, n
}

// The recorded Kimi round trip: the chain's web_search function becomes the builtin
// $web_search (thinking off for kimi-k2.5), the round-1 call is echoed exactly as the
// recorded client sent it (the assistant message as it came, the arguments verbatim
// in a tool message, plus the documented name), and the final answer's markdown links
// become [n] markers with the cited pages as sources; usage is both rounds', the
// search is ¥0.03.
func TestKimiRecordedRoundTrip(t *testing.T) {
	t.Parallel()
	p := &replay{answers: [][]byte{
		fixtures.Read("moonshot/hermoonshotes-round1-tool-calls.response.json"),
		fixtures.Read("moonshot/hermoonshotes-round2-final.response.json"),
	}}
	comp, err := nativeCaller(t, openaichat.Kimi, p).Complete(context.Background(), []byte(kimiBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.requests) != 2 {
		t.Fatalf("%d requests, want 2", len(p.requests))
	}
	for i, req := range p.requests {
		if string(req["tools"]) != `[{"type":"builtin_function","function":{"name":"$web_search"}}]` || req["tool_choice"] != nil {
			t.Errorf("request %d tools %s, tool_choice %s", i, req["tools"], req["tool_choice"])
		}
		if string(req["thinking"]) != `{"type":"disabled"}` {
			t.Errorf("request %d thinking %s (kimi-k2.5 must not think with $web_search)", i, req["thinking"])
		}
	}
	var sent []map[string]any
	json.Unmarshal(p.requests[1]["messages"], &sent)
	var rec struct {
		Messages []map[string]any `json:"messages"`
	}
	json.Unmarshal(fixtures.Read("moonshot/hermoonshotes-round2-echo.request-messages.json"), &rec)
	if len(sent) != 3 {
		t.Fatalf("round 2 messages %v", sent)
	}
	echo := sent[1:]
	if echo[1]["name"] != "$web_search" {
		t.Errorf("tool message name %v, want $web_search (docs)", echo[1]["name"])
	}
	delete(echo[1], "name") // the recorded client left it out
	if !reflect.DeepEqual(echo, rec.Messages) {
		t.Errorf("echo\n %v\nwant (recorded)\n %v", echo, rec.Messages)
	}
	msg, n := report(t, comp.Message)
	content := llm.Text(msg["content"])
	if !strings.Contains(content, "(https://www.yumiok.com/archives/6077.html)[1]") || !strings.Contains(content, "(https://www.techritual.com/2026/04/14/507442/)[2]") {
		t.Errorf("content %q", content)
	}
	if msg["tool_calls"] != nil || comp.FinishReason != "stop" {
		t.Errorf("finish %s, message %s", comp.FinishReason, comp.Message)
	}
	if n == nil || n.Protocol != "kimi.chat" || n.Requests != 1 || n.CostUSD != 0.03*0.14 || len(n.Searches) != 1 || n.Searches[0].ID != "t-web_search-69e395879d68" || n.Unfinished {
		t.Fatalf("report %+v", n)
	}
	want := []llm.NativeSource{
		{URL: "https://www.yumiok.com/archives/6077.html", Title: "Kimi K2.6 Code Preview 正式发布：万亿参数编程大模型上线"},
		{URL: "https://www.techritual.com/2026/04/14/507442/", Title: "Kimi K2.6-code-preview 低調發布：萬億參數編程大模型實測達 Sonnet 4.6 水平"},
	}
	if !reflect.DeepEqual(n.Sources, want) || len(n.Searches[0].URLs) != 2 {
		t.Errorf("sources %+v, search %+v", n.Sources, n.Searches[0])
	}
	if comp.Usage != (llm.Usage{PromptTokens: 178 + 8182, CompletionTokens: 1 + 1971, TotalTokens: 179 + 10153}) {
		t.Errorf("usage %+v", comp.Usage)
	}
}

// A $web_search mixed with a client's tool call is not echoed: the chain gets the
// client's call (the search is billed: Moonshot charges for the call it named).
func TestKimiMixedCalls(t *testing.T) {
	t.Parallel()
	round := `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"","tool_calls":[` +
		`{"id":"t-web_search-1","type":"builtin_function","function":{"name":"$web_search","arguments":"{\"search_result\":{\"search_id\":\"x\"}}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	p := &replay{answers: [][]byte{[]byte(round)}}
	comp, err := nativeCaller(t, openaichat.Kimi, p).Complete(context.Background(), []byte(kimiBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, n := report(t, comp.Message)
	var calls []llm.ToolCall
	json.Unmarshal(m["tool_calls"], &calls)
	if len(p.requests) != 1 || comp.FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "get_weather" {
		t.Errorf("%d requests, finish %s, message %s", len(p.requests), comp.FinishReason, comp.Message)
	}
	if n == nil || n.Requests != 1 || len(n.Sources) != 0 {
		t.Errorf("report %+v", n)
	}
}

// Without the fleet's web_search offered the call is a plain Chat call: no builtin
// function, no thinking switch, the text as the model wrote it, no report.
func TestKimiWithoutSearchPassesThrough(t *testing.T) {
	t.Parallel()
	round := `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi [1]"}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	p := &replay{answers: [][]byte{[]byte(round)}}
	body := `{"model":"kimi-k2.5","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","searchfleet_native":{"protocol":"kimi.chat"}},{"role":"user","content":"hi"}]}`
	comp, err := nativeCaller(t, openaichat.Kimi, p).Complete(context.Background(), []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	req := p.requests[0]
	if strings.Contains(string(req["messages"]), llm.NativeKey) || req["tools"] != nil || req["thinking"] != nil {
		t.Errorf("request %v", req)
	}
	if m, n := report(t, comp.Message); n != nil || llm.Text(m["content"]) != "hi [1]" {
		t.Errorf("message %s", comp.Message)
	}
}

// A model still searching after four rounds is cut off: four calls, four searches
// billed, the report says it was unfinished, and no calls are left for the chain.
func TestKimiRoundsBounded(t *testing.T) {
	t.Parallel()
	round := fixtures.Read("moonshot/hermoonshotes-round1-tool-calls.response.json")
	p := &replay{answers: [][]byte{round, round, round, round, round}}
	comp, err := nativeCaller(t, openaichat.Kimi, p).Complete(context.Background(), []byte(kimiBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, n := report(t, comp.Message)
	if len(p.requests) != 4 || comp.FinishReason != "stop" || m["tool_calls"] != nil {
		t.Errorf("%d requests, finish %s, message %s", len(p.requests), comp.FinishReason, comp.Message)
	}
	if n == nil || n.Requests != 4 || len(n.Searches) != 4 || !n.Unfinished || comp.Usage.PromptTokens != 4*178 {
		t.Errorf("report %+v, usage %+v", n, comp.Usage)
	}
}

const glmBody = `{"model":"glm-4.7","messages":[{"role":"user","content":"2025年4月的重要财经事件"}],` +
	`"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}`

// GLM's web_search tool replaces the fleet's function; the response's top-level
// web_search array gives the sources, and the model's "[来源：ref_1]" markers become
// [n] (pages numbered by first citation, an uncited or link-less result no source);
// one search at search_pro's ¥0.03.
func TestGLMRecordedAnswer(t *testing.T) {
	t.Parallel()
	p := &replay{answers: [][]byte{fixtures.Read("zhipu/glm-chat-finance-zh.CONSTRUCTED.json")}}
	comp, err := nativeCaller(t, openaichat.GLM, p).Complete(context.Background(), []byte(glmBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	var tools []map[string]any
	json.Unmarshal(p.requests[0]["tools"], &tools)
	if len(tools) != 1 || tools[0]["type"] != "web_search" || tools[0]["web_search"].(map[string]any)["search_result"] != true {
		t.Errorf("tools %s", p.requests[0]["tools"])
	}
	msg, n := report(t, comp.Message)
	content := llm.Text(msg["content"])
	if strings.Contains(content, "ref_") || strings.Count(content, "[1]") != 2 || strings.Contains(content, "[2]") {
		t.Errorf("content %q", content)
	}
	want := []llm.NativeSource{{URL: "https://www.sohu.com/a/887836650_121956424", Title: "4月23日财经焦点：全球市场重大事件与数据新动向解析"}}
	if n == nil || n.Protocol != "glm.chat" || n.Requests != 1 || n.CostUSD != 0.03*0.14 || !reflect.DeepEqual(n.Sources, want) {
		t.Fatalf("report %+v", n)
	}
	if len(n.Searches) != 1 || len(n.Searches[0].URLs) != 2 { // the third result has no link
		t.Errorf("searches %+v", n.Searches)
	}
	if comp.Usage.PromptTokens != 4199 || comp.FinishReason != "stop" {
		t.Errorf("usage %+v finish %s", comp.Usage, comp.FinishReason)
	}
}

// Streamed, the web_search array arrives as a top-level key of the last chunk (the
// documented default; no recording exists): the answer is the whole one's.
func TestGLMStreamed(t *testing.T) {
	t.Parallel()
	var rec struct {
		ID        string `json:"id"`
		Choices   []struct{ Message struct{ Content string } }
		Usage     json.RawMessage `json:"usage"`
		WebSearch json.RawMessage `json:"web_search"`
	}
	json.Unmarshal(fixtures.Read("zhipu/docs-en-chat-web-search-with-web_search-field.TRIMMED.response.json"), &rec)
	answer := "Here is the calendar.\n" + rec.Choices[0].Message.Content
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, piece := range strings.SplitAfter(answer, " ") {
			b, _ := json.Marshal(map[string]any{"id": rec.ID, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": piece}}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		b, _ := json.Marshal(map[string]any{"id": rec.ID, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}},
			"usage": rec.Usage, "web_search": rec.WebSearch})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	})
	var streamed strings.Builder
	comp, err := nativeCaller(t, openaichat.GLM, srv).Complete(context.Background(), []byte(glmBody), func(d llm.Delta) { streamed.WriteString(d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	msg, n := report(t, comp.Message)
	content := llm.Text(msg["content"])
	if !strings.Contains(content, "Released at 22:30. Crude oil inventory data will provide a key reference point for the market, affecting oil price fluctuations. [1]") || !strings.Contains(content, "[2]") {
		t.Errorf("content %q", content)
	}
	if !strings.HasPrefix(streamed.String(), "Here is the calendar.\n") {
		t.Errorf("streamed %q", streamed.String())
	}
	if n == nil || len(n.Sources) != 2 || n.Sources[0].Title != "April 23 Financial Highlights: Analyzing Major Global Market Events and New Data Trends" {
		t.Errorf("report %+v", n)
	}
	if comp.Usage.TotalTokens != 5067 {
		t.Errorf("usage %+v", comp.Usage)
	}
}
