package wire_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	llmanthropic "github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	llmresponses "github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Every recorded request decodes in its protocol's codec, and its Chat form passes the
// chat endpoint's validation.
func TestFixtureRequestsDecode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		glob  string
		codec wire.ClientCodec
	}{
		{"anthropic/*.request.json", llmanthropic.Client},
		{"openai/pydantic-responses-*.request.json", llmresponses.Client},
		{"openai/pydantic-chat-*.request.json", openaichat.Client},
	} {
		names, _ := fs.Glob(fixtures.FS(), c.glob)
		if len(names) == 0 {
			t.Fatalf("no fixtures %s", c.glob)
		}
		for _, n := range names {
			req, err := c.codec.DecodeRequest(fixtures.Read(n))
			if err != nil {
				t.Errorf("%s: %v", n, err)
				continue
			}
			if len(req.Messages) == 0 || req.Model == "" {
				t.Errorf("%s: decoded %+v", n, req)
			}
			body, err := openaichat.Client.EncodeRequest(req, "m")
			if err != nil {
				t.Errorf("%s: chat form: %v", n, err)
				continue
			}
			if _, err := llm.ParseChatRequest(body); err != nil {
				t.Errorf("%s: chat form refused: %v\n%s", n, err, body)
			}
		}
	}
}

func TestSearchSettings(t *testing.T) {
	t.Parallel()
	req, err := llmresponses.Client.DecodeRequest(fixtures.Read("openai/pydantic-responses-web-search-allowed-domains.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s := req.Search; s == nil || !s.Requested || len(s.AllowedDomains) != 1 || s.AllowedDomains[0] != "wikipedia.org" || s.Count != 10 {
		t.Fatalf("responses search %+v", req.Search)
	}
	if req.System != "You are a helpful assistant." {
		t.Errorf("instructions %q", req.System)
	}
	chat, err := openaichat.Client.DecodeRequest(fixtures.Read("openai/pydantic-chat-search-preview-user-location.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s := chat.Search; s == nil || s.Country != "NL" || len(s.Unhonoured) != 1 || !strings.Contains(s.Unhonoured[0], "city") {
		t.Fatalf("chat search %+v", chat.Search)
	}
	// Chat tool declarations of the fleet's tool, OpenRouter's, Gemini's and Kimi's are
	// taken out of tools into Search; the function tool stays.
	cr, err := llm.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[
		{"type":"function","function":{"name":"f"}},
		{"type":"web_search","engine":"brave","max_uses":2,"blocked_domains":["x.com"]},
		{"type":"openrouter:web_search","parameters":{"max_results":3,"allowed_domains":["a.org"]}},
		{"googleSearch":{}},
		{"type":"builtin_function","function":{"name":"$web_search"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := cr.Search
	if len(cr.Tools) != 1 || s == nil || s.Engine != "brave" || s.MaxUses != 2 || s.Count != 3 || s.AllowedDomains[0] != "a.org" || s.BlockedDomains[0] != "x.com" {
		t.Fatalf("tools %d search %+v", len(cr.Tools), s)
	}
	req, err = openaichat.FromChat(cr)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := openaichat.Model.EncodeRequest(req, "up"); strings.Contains(string(body), "web_search") || strings.Contains(string(body), "googleSearch") {
		t.Errorf("search declarations forwarded upstream: %s", body)
	}
	if _, err := llm.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"searchfleet":{"protocol":"openai.responses"}}`)); err == nil {
		t.Error("a client may not send the searchfleet key")
	}
}

// answer is an answer with a search, a failed search, cited non-ASCII text and a
// client tool call.
func answer() *wire.Response {
	text := "Température à Paris : 18°C [1][2]. Rain later [1]. Done."
	idx := func(s string) int { return len([]rune(text[:strings.Index(text, s)])) }
	return &wire.Response{ID: "resp_x", JobID: "resp_x", Model: "m", Created: time.Unix(1700000000, 0), Status: wire.StatusCompleted, Stop: wire.StopEndTurn,
		Usage: wire.Usage{InputTokens: 10, OutputTokens: 5, WebSearches: 1}, Notes: []string{"city not honoured"},
		Content: []wire.Part{
			{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: "0_a", Name: "web_search", Query: "paris weather"}},
			{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "0_a", Sources: []wire.Source{{URL: "https://a.fr", Title: "A"}, {URL: "https://b.fr", Title: "B", PageAge: "2 days ago"}}}},
			{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: "0_b", Name: "web_search", Query: "x"}},
			{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "0_b", Error: &wire.SearchError{Code: "unavailable"}}},
			{Kind: wire.PartText, Text: text, Citations: []wire.Citation{
				{URL: "https://a.fr", Title: "A", Start: idx("[1][2]"), End: idx("[1][2]") + 3},
				{URL: "https://b.fr", Title: "B", Start: idx("[2]"), End: idx("[2]") + 3},
				{URL: "https://a.fr", Title: "A", Start: idx("[1]. Done"), End: idx("[1]. Done") + 3}}},
		}}
}

func TestResponsesEncodingDecodesInSDK(t *testing.T) {
	t.Parallel()
	b, err := llmresponses.Client.EncodeResponse(answer())
	if err != nil {
		t.Fatal(err)
	}
	var r responses.Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 3 || r.Output[1].AsWebSearchCall().Status != "failed" || r.Output[0].AsWebSearchCall().Action.Sources[1].URL != "https://b.fr" {
		t.Fatalf("output %s", b)
	}
	text := r.OutputText()
	runes := []rune(text)
	anns := r.Output[2].AsMessage().Content[0].Annotations
	if len(anns) != 3 {
		t.Fatalf("annotations %d", len(anns))
	}
	for _, a := range anns {
		if got := string(runes[a.StartIndex:a.EndIndex]); got != "[1]" && got != "[2]" {
			t.Errorf("annotation %d..%d spans %q", a.StartIndex, a.EndIndex, got)
		}
	}
	// The recorded response decodes in the same SDK type with the same item kinds.
	var rec responses.Response
	if err := json.Unmarshal(fixtures.Read("openai/pydantic-responses-web-search-allowed-domains.response.json"), &rec); err != nil {
		t.Fatal(err)
	}
	// The stream: every event decodes as a stream event; the completed one carries the answer.
	st := llmresponses.Client.NewStream()
	evs := append(st.Start(answer()), st.Finish(answer())...)
	var last responses.ResponseStreamEventUnion
	for i, e := range evs {
		if err := json.Unmarshal(e.Data, &last); err != nil || last.Type != e.Name || last.SequenceNumber != int64(i) {
			t.Fatalf("event %d %s: %v", i, e.Data, err)
		}
	}
	if last.Type != "response.completed" || last.Response.OutputText() != text {
		t.Fatalf("last event %s", last.RawJSON())
	}
}

func TestAnthropicEncodingDecodesInSDK(t *testing.T) {
	t.Parallel()
	a := answer()
	b, err := llmanthropic.Client.EncodeResponse(a)
	if err != nil {
		t.Fatal(err)
	}
	var m anthropic.Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var kinds []string
	for _, c := range m.Content {
		kinds = append(kinds, c.Type)
		text.WriteString(c.Text)
	}
	if strings.Join(kinds[:4], ",") != "server_tool_use,web_search_tool_result,server_tool_use,web_search_tool_result" {
		t.Fatalf("blocks %v", kinds)
	}
	if text.String() != a.Text() {
		t.Errorf("text blocks join to %q", text.String())
	}
	first := m.Content[4]
	if first.Text != "Température à Paris : 18°C [1][2]" || len(first.Citations) != 2 || first.Citations[0].CitedText != "Température à Paris : 18°C" {
		t.Errorf("first text block %s", first.RawJSON())
	}
	if e := m.Content[3].AsWebSearchToolResult().Content; e.ErrorCode != "unavailable" {
		t.Errorf("failed search %s", m.Content[3].RawJSON())
	}
	if r := m.Content[1].AsWebSearchToolResult().Content.OfWebSearchResultBlockArray; len(r) != 2 || r[1].PageAge != "2 days ago" {
		t.Errorf("results %s", m.Content[1].RawJSON())
	}
	if m.Usage.ServerToolUse.WebSearchRequests != 1 || m.StopReason != "end_turn" {
		t.Errorf("usage %s stop %s", m.Usage.RawJSON(), m.StopReason)
	}
	// A recorded response decodes into the same SDK type.
	var rec anthropic.Message
	if err := json.Unmarshal(fixtures.Read("anthropic/pydantic-web-search-sf.response.json"), &rec); err != nil {
		t.Fatal(err)
	}
	// The stream accumulates to the same message.
	st := llmanthropic.Client.NewStream()
	var acc anthropic.Message
	for _, e := range append(st.Start(a), st.Finish(a)...) {
		var ev anthropic.MessageStreamEventUnion
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("%s: %v", e.Data, err)
		}
	}
	if len(acc.Content) != len(m.Content) || acc.Content[4].Text != first.Text || len(acc.Content[4].Citations) != 2 || acc.StopReason != "end_turn" {
		t.Fatalf("accumulated %+v", acc.Content)
	}
	// Errors have Anthropic's shape.
	var e struct {
		Type  string                `json:"type"`
		Error struct{ Type string } `json:"error"`
	}
	json.Unmarshal(llmanthropic.Client.EncodeError(&wire.Error{Status: 529, Message: "busy"}), &e)
	if e.Type != "error" || e.Error.Type != "overloaded_error" {
		t.Errorf("error %+v", e)
	}
}

// The chat worker's final answer and trace become the canonical answer.
func TestChatAnswerWithTrace(t *testing.T) {
	t.Parallel()
	resp, err := openaichat.Client.DecodeResponse([]byte(`{"id":"chatcmpl-j","created":1,"model":"m","choices":[{"message":{"role":"assistant","content":"Hi [1]","annotations":[{"type":"url_citation","url_citation":{"url":"https://a","title":"A","start_index":3,"end_index":6}}]},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5},"searchfleet":{"job_id":"j","sources":[{"title":"A","url":"https://a"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.AddTrace([]byte(`[{"hop":0,"call_id":"call_1","query":"q","sources":[{"url":"https://a"}]},{"hop":0,"call_id":"call_2","query":"q2","sources":[],"error":"SEARCH_LIMIT_REACHED: no"}]`)); err != nil {
		t.Fatal(err)
	}
	if len(resp.Content) != 5 || resp.Content[1].Search.Sources[0].Title != "A" || resp.Content[3].Search.Error.Code != "max_uses_exceeded" || resp.Usage.WebSearches != 1 {
		t.Fatalf("%+v", resp)
	}
	b, _ := openaichat.Client.EncodeResponse(resp)
	if !strings.Contains(string(b), `"start_index":3`) {
		t.Errorf("chat encoding %s", b)
	}
}

// A trace's per-source titles and page ages reach the Anthropic web_search_tool_result
// and the Responses web_search_call sources; a source without a title takes it from
// the answer's sources.
func TestTraceSourceTitlesAndAges(t *testing.T) {
	t.Parallel()
	answer := []byte(`{"id":"chatcmpl-j","created":1,"model":"m","choices":[{"message":{"role":"assistant","content":"Hi [1]"},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5},"searchfleet":{"job_id":"j","sources":[{"title":"Old A","url":"https://a"}]}}`)
	for _, tc := range []struct {
		name, trace, title, age string
	}{
		{"current", `[{"hop":0,"call_id":"c1","query":"q","sources":[{"url":"https://a","title":"Page A","page_age":"March 3, 2026"},{"url":"https://b"}]}]`, "Page A", "March 3, 2026"},
		{"untitled", `[{"hop":0,"call_id":"c1","query":"q","sources":[{"url":"https://a"},{"url":"https://b","title":"Page B"}]}]`, "Old A", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := openaichat.Client.DecodeResponse(answer)
			if err != nil {
				t.Fatal(err)
			}
			if err := resp.AddTrace([]byte(tc.trace)); err != nil {
				t.Fatal(err)
			}
			b, err := llmanthropic.Client.EncodeResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			var msg struct {
				Content []struct {
					Type    string `json:"type"`
					Content []struct {
						URL     string  `json:"url"`
						Title   string  `json:"title"`
						PageAge *string `json:"page_age"`
					} `json:"content"`
				} `json:"content"`
			}
			if err := json.Unmarshal(b, &msg); err != nil || len(msg.Content) < 2 || msg.Content[1].Type != "web_search_tool_result" || len(msg.Content[1].Content) != 2 {
				t.Fatalf("anthropic %s (%v)", b, err)
			}
			a := msg.Content[1].Content[0]
			if a.URL != "https://a" || a.Title != tc.title || (tc.age == "") != (a.PageAge == nil) || (a.PageAge != nil && *a.PageAge != tc.age) {
				t.Errorf("result %+v, want title %q page_age %q: %s", a, tc.title, tc.age, b)
			}
			b, err = llmresponses.Client.EncodeResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				Output []struct {
					Type   string `json:"type"`
					Action struct {
						Sources []struct{ Type, URL, Title string } `json:"sources"`
					} `json:"action"`
				} `json:"output"`
			}
			if err := json.Unmarshal(b, &r); err != nil || len(r.Output) == 0 || r.Output[0].Type != "web_search_call" || len(r.Output[0].Action.Sources) != 2 {
				t.Fatalf("responses %s (%v)", b, err)
			}
			if s := r.Output[0].Action.Sources[0]; s.Type != "url" || s.URL != "https://a" || s.Title != tc.title {
				t.Errorf("responses source %+v, want title %q", s, tc.title)
			}
		})
	}
}

// A search a spent budget refused (the tenant's, the batch's or the request's) reaches
// an Anthropic client as max_uses_exceeded, the closest official error code.
func TestBudgetExhaustedErrorCode(t *testing.T) {
	r := &wire.Response{}
	if err := r.AddTrace(json.RawMessage(`[{"hop":0,"call_id":"c1","query":"q","sources":[],"error":"SEARCH_BUDGET_EXHAUSTED: the search budget is used up"}]`)); err != nil {
		t.Fatal(err)
	}
	if len(r.Content) != 2 || r.Content[1].Search == nil || r.Content[1].Search.Error == nil || r.Content[1].Search.Error.Code != "max_uses_exceeded" || r.Usage.WebSearches != 0 {
		t.Fatalf("content %+v, searches %d", r.Content, r.Usage.WebSearches)
	}
}

// benchTrace is a one-search job's trace as the chat worker records it: five sources
// with titles and dates, and the fields the answer does not read (usage, worker,
// timing, the record's address).
func benchTrace() []byte {
	var srcs []string
	for i := range 5 {
		srcs = append(srcs, fmt.Sprintf(`{"url":"https://site%d.example/page/%d","title":"A page about the question, number %d","page_age":"March %d, 2026"}`, i, i, i, i+1))
	}
	return []byte(`[{"hop":0,"call_id":"call_1","engine":"brave","engine_choice":"default","query":"what is the question","sources":[` + strings.Join(srcs, ",") +
		`],"usage":{"searches":1,"cost_usd":0.005},"worker":"w1","attempts":1,"ms":12,"result":"r1"}]`)
}

// What putting a job's trace into its answer costs (the ingress does it once per
// answered job).
func BenchmarkAddTrace(b *testing.B) {
	trace := benchTrace()
	b.ReportAllocs()
	for b.Loop() {
		r := &wire.Response{}
		if err := r.AddTrace(trace); err != nil {
			b.Fatal(err)
		}
	}
}
