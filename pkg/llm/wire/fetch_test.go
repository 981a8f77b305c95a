package wire_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// keys are an object's keys, sorted.
func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// blocks decodes a Messages response's content blocks.
func blocks(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var m struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.Content
}

func blockOf(bs []map[string]any, typ, name string) map[string]any {
	for _, b := range bs {
		if b["type"] == typ && (name == "" || b["name"] == name) {
			return b
		}
	}
	return nil
}

// The request's web_fetch server tool (the recorded 20260209 declaration, nulls and
// all) is served: the request asks the fleet to offer web_fetch.
func TestAnthropicWebFetchDeclaration(t *testing.T) {
	t.Parallel()
	r, err := anthropic.Client.DecodeRequest(fixtures.Read("anthropic/pydantic-web-tools-20260209.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Search == nil || !r.Search.Fetch || !r.Search.Requested || len(r.Search.Unhonoured) != 0 {
		t.Fatalf("search options %+v", r.Search)
	}
	r, err = anthropic.Client.DecodeRequest([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":2}]}`))
	if err != nil || !r.Search.Fetch || r.Search.MaxFetches != 2 {
		t.Fatalf("20250910: %+v %v", r.Search, err)
	}
	if _, err := anthropic.Client.DecodeRequest([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_fetch_20250910","name":"fetch"}]}`)); err == nil {
		t.Fatal("a web_fetch tool named otherwise was accepted")
	}
}

// The fleet's fetches render as the recorded blocks: server_tool_use web_fetch with
// its url, web_fetch_tool_result with a web_fetch_result document or a
// web_fetch_tool_result_error, keys as Anthropic sends them; usage counts the fetch.
func TestAnthropicWebFetchBlocksMatchTheRecordings(t *testing.T) {
	t.Parallel()
	const url = "https://ai.pydantic.dev"
	trace := []wire.TraceEntry{
		{Hop: 0, CallID: "f1", Tool: "web_fetch", URL: url, Sources: []wire.TraceSource{{URL: url, Title: "Pydantic AI"}}, Kind: "page", Excerpt: "Pydantic AI - Pydantic AI", RetrievedAt: "2026-04-07T15:19:29Z"},
		{Hop: 0, CallID: "f2", Tool: "web_fetch", URL: "http://10.0.0.5/", Sources: []wire.TraceSource{}, Error: "FETCH_REFUSED: refused: private address"},
	}
	tb, _ := json.Marshal(trace)
	r := &wire.Response{ID: "msg_1", Model: "m", Content: []wire.Part{{Kind: wire.PartText, Text: "It is Pydantic AI [1]."}}}
	if err := r.AddTrace(tb); err != nil {
		t.Fatal(err)
	}
	b, err := anthropic.Client.EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	got := blocks(t, b)
	ok := blocks(t, fixtures.Read("anthropic/pydantic-web-tools-20260209.response.json"))
	failed := blocks(t, fixtures.Read("anthropic/vercel-web-fetch-tool-result-error-unavailable.json"))

	use, want := blockOf(got, "server_tool_use", "web_fetch"), blockOf(failed, "server_tool_use", "web_fetch")
	if use == nil || !slices.Equal(keys(use), keys(want)) || use["input"].(map[string]any)["url"] != url {
		t.Fatalf("server_tool_use %v, recorded %v", use, want)
	}
	var page, refused map[string]any
	for _, bl := range got {
		if bl["type"] == "web_fetch_tool_result" {
			if c := bl["content"].(map[string]any); c["type"] == "web_fetch_result" {
				page = bl
			} else {
				refused = bl
			}
		}
	}
	rec := blockOf(ok, "web_fetch_tool_result", "")
	delete(rec, "caller") // the recording's fetch ran inside code execution; the fleet's are direct
	if page == nil || !slices.Equal(keys(page), keys(rec)) {
		t.Fatalf("web_fetch_tool_result %v, recorded %v", page, rec)
	}
	pc, rc := page["content"].(map[string]any), rec["content"].(map[string]any)
	if !slices.Equal(keys(pc), keys(rc)) || !slices.Equal(keys(pc["content"].(map[string]any)), keys(rc["content"].(map[string]any))) {
		t.Fatalf("web_fetch_result %v, recorded %v", pc, rc)
	}
	src := pc["content"].(map[string]any)["source"].(map[string]any)
	if !slices.Equal(keys(src), keys(rc["content"].(map[string]any)["source"].(map[string]any))) || src["data"] != "Pydantic AI - Pydantic AI" {
		t.Fatalf("document source %v", src)
	}
	recErr := blockOf(failed, "web_fetch_tool_result", "")
	if refused == nil || !slices.Equal(keys(refused), keys(recErr)) || !slices.Equal(keys(refused["content"].(map[string]any)), keys(recErr["content"].(map[string]any))) ||
		refused["content"].(map[string]any)["error_code"] != "url_not_allowed" {
		t.Fatalf("error block %v, recorded %v", refused, recErr)
	}
	var m struct {
		Usage struct {
			ServerToolUse map[string]int `json:"server_tool_use"`
		} `json:"usage"`
	}
	json.Unmarshal(b, &m)
	if m.Usage.ServerToolUse["web_fetch_requests"] != 1 || m.Usage.ServerToolUse["web_search_requests"] != 0 {
		t.Fatalf("usage %v", m.Usage.ServerToolUse)
	}
}

// An answer with a fetch, sent back as history, reads as the fetch it was: a call of
// web_fetch with its URL and the page (or the recorded error) as its result.
func TestAnthropicWebFetchHistory(t *testing.T) {
	t.Parallel()
	var rec map[string]any
	json.Unmarshal(fixtures.Read("anthropic/vercel-web-fetch-tool-result-error-unavailable.json"), &rec)
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 10, "messages": []any{
		map[string]any{"role": "user", "content": "read it"},
		map[string]any{"role": "assistant", "content": rec["content"]},
		map[string]any{"role": "user", "content": "and now?"},
	}})
	r, err := anthropic.Client.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	var call *wire.ServerCall
	var res *wire.SearchResult
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			switch p.Kind {
			case wire.PartServerCall:
				call = p.Server
			case wire.PartServerResult:
				res = p.Search
			}
		}
	}
	if !call.IsFetch() || call.URL == "" || res == nil || res.Error == nil || res.Error.Code != "unavailable" {
		t.Fatalf("call %+v result %+v", call, res)
	}
}

// An answer shows a server call only for a tool the request declared: the fleet's own
// searches and fetches of an undeclared tool leave only the text's citations (a strict
// client fails on a call it cannot find among its tools); Chat is left as it is.
func TestAnswerHidesCallsOfUndeclaredTools(t *testing.T) {
	t.Parallel()
	trace, _ := json.Marshal([]wire.TraceEntry{
		{Hop: 0, CallID: "s1", Query: "q", Sources: []wire.TraceSource{{URL: "https://a.example", Title: "A"}}},
		{Hop: 1, CallID: "f1", Tool: "web_fetch", URL: "https://a.example", Sources: []wire.TraceSource{{URL: "https://a.example", Title: "A"}}, Kind: "page", Excerpt: "A"},
	})
	cited := wire.Part{Kind: wire.PartText, Text: "A [1].", Citations: []wire.Citation{{URL: "https://a.example", Title: "A", Start: 2, End: 5}}}
	searchDeclared := &wire.Request{Search: &llm.SearchOptions{Requested: true}}
	fetchDeclared := &wire.Request{Search: &llm.SearchOptions{Fetch: true}}
	bothDeclared := &wire.Request{Search: &llm.SearchOptions{Requested: true, Fetch: true}}
	maxToolCalls := &wire.Request{Search: &llm.SearchOptions{MaxUses: 2}} // Responses max_tool_calls declares no tool
	for _, tc := range []struct {
		name  string
		req   *wire.Request
		p     wire.Protocol
		calls []string // the server calls kept, in order
	}{
		{"messages, nothing declared", &wire.Request{}, wire.AnthropicMessages, nil},
		{"messages, web_search declared", searchDeclared, wire.AnthropicMessages, []string{"web_search"}},
		{"messages, web_fetch declared", fetchDeclared, wire.AnthropicMessages, []string{"web_fetch"}},
		{"messages, both declared", bothDeclared, wire.AnthropicMessages, []string{"web_search", "web_fetch"}},
		{"responses, nothing declared", maxToolCalls, wire.OpenAIResponses, nil},
		{"responses, web_search declared (a fetch is its open_page)", searchDeclared, wire.OpenAIResponses, []string{"web_search", "web_fetch"}},
		{"chat, nothing declared", nil, wire.OpenAIChat, []string{"web_search", "web_fetch"}},
	} {
		r := &wire.Response{ID: "r", Content: []wire.Part{cited}}
		if err := r.AddTrace(trace); err != nil {
			t.Fatal(err)
		}
		r.ShowTo(tc.req, tc.p)
		var calls []string
		results := 0
		for _, p := range r.Content {
			switch p.Kind {
			case wire.PartServerCall:
				calls = append(calls, p.Server.Name)
			case wire.PartServerResult:
				results++
			}
		}
		last := r.Content[len(r.Content)-1]
		if !slices.Equal(calls, tc.calls) || results != len(tc.calls) || last.Kind != wire.PartText || len(last.Citations) != 1 {
			t.Errorf("%s: calls %v, %d results, last part %+v; want calls %v and the cited text", tc.name, calls, results, last, tc.calls)
		}
		if r.Usage.WebSearches != 1 || r.Usage.WebFetches != 1 {
			t.Errorf("%s: usage %+v: the searches made are still counted", tc.name, r.Usage)
		}
	}
}
