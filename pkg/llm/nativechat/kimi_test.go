package nativechat_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
)

// chainBody is a chain's request offering the fleet's web_search function.
const chainBody = `{"model":"kimi-k2.5","messages":[{"role":"user","content":"kimi k2.6 code preview user review"}],` +
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

func newCaller(t *testing.T, kind nativechat.Kind, h http.Handler) *nativechat.Caller {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return nativechat.New(kind, llm.NewClient("p", srv.URL, "k", nativechat.HTTPClient(srv.Client())))
}

// native reads a message's native-search report.
func native(t *testing.T, msg json.RawMessage) (map[string]json.RawMessage, *llm.NativeSearch) {
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

func text(raw json.RawMessage) string { return llm.Text(raw) }

// The recorded Kimi round trip: the chain's web_search function becomes the builtin
// $web_search, the round-1 call is echoed exactly as the recorded client sent it (the
// assistant message as it came, the arguments verbatim in a tool message, plus the
// documented name), and the final answer's markdown links become [n] markers with the
// cited pages as sources; usage is both rounds', the search is ¥0.03.
func TestKimiRecordedRoundTrip(t *testing.T) {
	t.Parallel()
	p := &replay{answers: [][]byte{
		fixtures.Read("moonshot/hermoonshotes-round1-tool-calls.response.json"),
		fixtures.Read("moonshot/hermoonshotes-round2-final.response.json"),
	}}
	comp, err := newCaller(t, nativechat.Kimi, p).Complete(context.Background(), []byte(chainBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.requests) != 2 {
		t.Fatalf("%d requests, want 2", len(p.requests))
	}
	for i, req := range p.requests {
		if string(req["tools"]) != `[{"type":"builtin_function","function":{"name":"$web_search"}}]` {
			t.Errorf("request %d tools %s", i, req["tools"])
		}
		if _, ok := req["tool_choice"]; ok {
			t.Errorf("request %d keeps tool_choice %s", i, req["tool_choice"])
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

	msg, n := native(t, comp.Message)
	content := text(msg["content"])
	if !strings.Contains(content, "(https://www.yumiok.com/archives/6077.html)[1]") || !strings.Contains(content, "(https://www.techritual.com/2026/04/14/507442/)[2]") {
		t.Errorf("content %q", content)
	}
	if msg["tool_calls"] != nil || comp.FinishReason != "stop" {
		t.Errorf("finish %s, message %s", comp.FinishReason, comp.Message)
	}
	if n == nil || n.Protocol != "kimi.chat" || n.Requests != 1 || n.CostUSD != 0.03*0.14 || len(n.Searches) != 1 || n.Searches[0].ID != "t-web_search-69e395879d68" {
		t.Fatalf("report %+v", n)
	}
	want := []llm.NativeSource{
		{URL: "https://www.yumiok.com/archives/6077.html", Title: "Kimi K2.6 Code Preview 正式发布：万亿参数编程大模型上线"},
		{URL: "https://www.techritual.com/2026/04/14/507442/", Title: "Kimi K2.6-code-preview 低調發布：萬億參數編程大模型實測達 Sonnet 4.6 水平"},
	}
	if !reflect.DeepEqual(n.Sources, want) || len(n.Searches[0].URLs) != 2 {
		t.Errorf("sources %+v, search %+v", n.Sources, n.Searches[0])
	}
	if got := llm.CitationMarkers(content, len(n.Sources)); len(got) != 2 {
		t.Errorf("markers %v", got)
	}
	if comp.Usage != (llm.Usage{PromptTokens: 178 + 8182, CompletionTokens: 1 + 1971, TotalTokens: 179 + 10153}) {
		t.Errorf("usage %+v", comp.Usage)
	}
}

// Links become markers by first appearance (the same URL the same n); a link whose
// text is a number becomes its marker; images are no sources; markers the model wrote
// itself cite nothing and go.
func TestKimiLinksToMarkers(t *testing.T) {
	t.Parallel()
	answer := "See [A](https://a.example/x) and ![img](https://img.example/p.png) [7].\n" +
		"Again [A again](https://a.example/x), then [2](https://b.example/y \"B\")."
	round := `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":` + quote(answer) + `}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	p := &replay{answers: [][]byte{[]byte(round)}}
	comp, err := newCaller(t, nativechat.Kimi, p).Complete(context.Background(), []byte(chainBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, n := native(t, comp.Message)
	want := "See [A](https://a.example/x)[1] and ![img](https://img.example/p.png) .\n" +
		"Again [A again](https://a.example/x)[1], then [2]."
	if got := text(msg["content"]); got != want {
		t.Errorf("content\n %q\nwant\n %q", got, want)
	}
	// No $web_search call: the model did not search, and nothing is billed.
	if n != nil {
		t.Errorf("report %+v for an answer without a search", n)
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
	comp, err := newCaller(t, nativechat.Kimi, p).Complete(context.Background(), []byte(chainBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, n := native(t, comp.Message)
	var calls []llm.ToolCall
	json.Unmarshal(m["tool_calls"], &calls)
	if len(p.requests) != 1 || comp.FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "get_weather" {
		t.Errorf("%d requests, finish %s, message %s", len(p.requests), comp.FinishReason, comp.Message)
	}
	if n == nil || n.Requests != 1 || len(n.Sources) != 0 {
		t.Errorf("report %+v", n)
	}
}

// Without the fleet's web_search offered the call is the client's, unchanged but for
// the fleet's reports in earlier answers, which never reach a provider.
func TestKimiWithoutSearchPassesThrough(t *testing.T) {
	t.Parallel()
	round := `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi [1]"}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	p := &replay{answers: [][]byte{[]byte(round)}}
	body := `{"model":"kimi-k2.5","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","searchfleet_native":{"protocol":"kimi.chat"}},{"role":"user","content":"hi"}]}`
	comp, err := newCaller(t, nativechat.Kimi, p).Complete(context.Background(), []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	req := p.requests[0]
	if strings.Contains(string(req["messages"]), llm.NativeKey) || req["tools"] != nil || req["thinking"] != nil {
		t.Errorf("request %v", req)
	}
	if m, n := native(t, comp.Message); n != nil || text(m["content"]) != "hi [1]" {
		t.Errorf("message %s", comp.Message)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A model still searching after four rounds is cut off: four calls, four searches
// billed, and an answer with no calls for the chain to run.
func TestKimiRoundsBounded(t *testing.T) {
	t.Parallel()
	round := fixtures.Read("moonshot/hermoonshotes-round1-tool-calls.response.json")
	p := &replay{answers: [][]byte{round, round, round, round, round}}
	comp, err := newCaller(t, nativechat.Kimi, p).Complete(context.Background(), []byte(chainBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, n := native(t, comp.Message)
	if len(p.requests) != 4 || comp.FinishReason != "stop" || m["tool_calls"] != nil {
		t.Errorf("%d requests, finish %s, message %s", len(p.requests), comp.FinishReason, comp.Message)
	}
	if n == nil || n.Requests != 4 || len(n.Searches) != 4 || comp.Usage.PromptTokens != 4*178 {
		t.Errorf("report %+v, usage %+v", n, comp.Usage)
	}
}
