package wire_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// updateGolden rewrites testdata/request_golden.json from the current encoders: run
// it only with encoders whose output is known good.
var updateGolden = flag.Bool("update-request-golden", false, "rewrite testdata/request_golden.json")

// requestEncoder is anything that renders a canonical request for a model: the model
// protocols and the client codecs (whose EncodeRequest is the stored form).
type requestEncoder interface {
	EncodeRequest(r *wire.Request, model string) ([]byte, error)
}

// goldenEncoders are every request encoder the golden table runs, by name.
var goldenEncoders = map[string]requestEncoder{
	"chat-model":      openaichat.Model,
	"kimi-model":      openaichat.Kimi,
	"glm-model":       openaichat.GLM,
	"responses-model": responses.Model,
	"anthropic-model": anthropic.Model,
	"gemini-model":    gemini.Model,
	"chat-codec":      openaichat.Client,
}

// goldenCase is one request of the golden table and the model name it is encoded for.
type goldenCase struct {
	name  string
	model string
	req   *wire.Request
}

// goldenRequests is a broad table of requests: every message role, every part kind,
// reasoning of every protocol, files, tools, tool_choice, streaming and the
// parameters that ride along; then every recorded client request in the fixtures
// that a client codec reads.
func goldenRequests(t testing.TB) []goldenCase {
	t.Helper()
	f := func(v float64) *float64 { return &v }
	yes, no := true, false
	params := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What <to> search & for."}},"required":["query"]}`)
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 not really a pdf"))
	txt := base64.StdEncoding.EncodeToString([]byte("a,b\n1,2\n"))
	text := func(s string) wire.Part { return wire.Part{Kind: wire.PartText, Text: s} }
	call := func(id, name, args string) wire.Part {
		return wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: id, Name: name, Arguments: args}}
	}
	result := func(id string, parts ...wire.Part) wire.Part {
		return wire.Part{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: id, Parts: parts}}
	}
	reason := func(r wire.Reasoning) wire.Part { return wire.Part{Kind: wire.PartReasoning, Reasoning: &r} }
	user := func(parts ...wire.Part) wire.Message { return wire.Message{Role: wire.RoleUser, Parts: parts} }
	asst := func(parts ...wire.Part) wire.Message { return wire.Message{Role: wire.RoleAssistant, Parts: parts} }
	tool := func(parts ...wire.Part) wire.Message { return wire.Message{Role: wire.RoleTool, Parts: parts} }
	tools := []wire.Tool{
		{Name: "web_search", Description: "Search the web.", Parameters: params, Strict: &yes},
		{Name: "get_time"},
		{Name: "noop", Parameters: json.RawMessage(`null`), Strict: &no},
		{Name: "fmt", Description: "Spaced schema.", Parameters: json.RawMessage("{ \"type\" : \"object\",\n \"properties\": {} }")},
	}
	cases := []goldenCase{
		{name: "plain", model: "gpt-4.1", req: &wire.Request{Messages: []wire.Message{user(text("Hello"))}}},
		{name: "plain-stream-system", model: "deepseek-chat", req: &wire.Request{System: "Be brief.\nVery.", Stream: true,
			Messages: []wire.Message{user(text("Hi <b>there</b> & \u2028 \"quoted\" \\ é 😀 \x01"))}}},
		{name: "empty", model: "m", req: &wire.Request{}},
		{name: "conversation", model: "gpt-4.1", req: &wire.Request{System: "sys", Messages: []wire.Message{
			user(text("one"), text("two")),
			asst(text("answer "), text("in parts")),
			asst(),
			{Role: wire.RoleSystem, Parts: []wire.Part{text("mid system")}},
			user(text("")),
			user(),
		}}},
		{name: "multipart", model: "gpt-4.1", req: &wire.Request{Messages: []wire.Message{
			user(text("look"), wire.Part{Kind: wire.PartImage, Image: &wire.Image{URL: "https://example.com/a.png?x=1&y=<2>"}},
				wire.Part{Kind: wire.PartImage, Image: &wire.Image{MediaType: "image/png", Data: "iVBORw0KGgo="}},
				wire.Part{Kind: wire.PartImage, Image: &wire.Image{URL: "data:image/jpeg;base64,/9j/4AAQ"}},
				text("and"), text("")),
			user(wire.Part{Kind: wire.PartImage, Image: &wire.Image{URL: "https://example.com/only.png"}}),
		}}},
		{name: "files", model: "gpt-4.1", req: &wire.Request{Messages: []wire.Message{
			user(text("read these"), wire.Part{Kind: wire.PartFile, File: &wire.File{Filename: "doc.pdf", MediaType: "application/pdf", Data: pdf}},
				wire.Part{Kind: wire.PartFile, File: &wire.File{Filename: "t.csv", MediaType: "text/csv", Data: txt}},
				wire.Part{Kind: wire.PartFile, File: &wire.File{MediaType: "text/plain", Data: txt}}),
		}}},
		{name: "text-files", model: "kimi-k2-turbo", req: &wire.Request{Messages: []wire.Message{
			user(text("as text"), wire.Part{Kind: wire.PartFile, File: &wire.File{Filename: "t.csv", MediaType: "text/csv", Data: txt}}),
		}}},
		{name: "file-url", model: "gpt-4.1", req: &wire.Request{Messages: []wire.Message{
			user(text("by url"), wire.Part{Kind: wire.PartFile, File: &wire.File{Filename: "r.pdf", MediaType: "application/pdf", URL: "https://example.com/r.pdf"}}),
		}}},
		{name: "tools", model: "gpt-4.1", req: &wire.Request{System: "Use tools.", Tools: tools,
			ToolChoice: &wire.ToolChoice{Mode: "tool", Name: "web_search"}, ParallelToolCalls: &no, MaxTokens: 300,
			Messages: []wire.Message{
				user(text("What's new?")),
				asst(text("Let me look."), call("call_1", "web_search", `{"query":"news <today>"}`), call("call_2", "get_time", `{}`)),
				tool(result("call_1", text("result one"), text("line two")), result("call_2", text("12:00"))),
				asst(call("call_3", "web_search", `{"query":"more"}`)),
				user(result("call_3", text("img result"), wire.Part{Kind: wire.PartImage, Image: &wire.Image{URL: "https://example.com/r.png"}}), text("thanks")),
				user(result("call_4")),
				wire.Message{Role: wire.RoleTool, Parts: []wire.Part{{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: "call_5", IsError: true, Parts: []wire.Part{text("boom")}}}}},
			}}},
		{name: "tool-choice-modes", model: "gpt-4.1", req: &wire.Request{Tools: tools[:1], ToolChoice: &wire.ToolChoice{Mode: "required"}, ParallelToolCalls: &yes,
			Messages: []wire.Message{user(text("go"))}}},
		{name: "tool-choice-none", model: "gpt-4.1", req: &wire.Request{Tools: tools[1:2], ToolChoice: &wire.ToolChoice{Mode: "none"},
			Messages: []wire.Message{user(text("go"))}}},
		{name: "tool-choice-no-tools", model: "gpt-4.1", req: &wire.Request{ToolChoice: &wire.ToolChoice{Mode: "auto"}, ParallelToolCalls: &yes,
			Messages: []wire.Message{user(text("go"))}}},
		{name: "params", model: "gpt-4.1", req: &wire.Request{Stream: true, MaxTokens: 1000, Temperature: f(0.25), TopP: f(1),
			Stop: []string{"END", "<stop>"}, ResponseFormat: json.RawMessage(`{"type": "json_object"}`),
			Reasoning: &wire.ReasoningConfig{Effort: "high"},
			Params: map[string]json.RawMessage{"seed": json.RawMessage(`42`), "user": json.RawMessage(`"u<1>"`),
				"stream_options": json.RawMessage(`{"include_usage":false}`), "logit_bias": json.RawMessage(`{ "50256" : -100 }`),
				"metadata": json.RawMessage(`{"a":"b & c"}`), "temperature": json.RawMessage(`0.9`)},
			Messages: []wire.Message{user(text("params"))}}},
		{name: "max-completion-tokens", model: "o3", req: &wire.Request{MaxTokens: 500, Temperature: f(0),
			Params:    map[string]json.RawMessage{"max_completion_tokens": json.RawMessage(`500`)},
			Reasoning: &wire.ReasoningConfig{BudgetTokens: 4096, Summary: "auto"},
			Messages:  []wire.Message{user(text("limit"))}}},
		{name: "reasoning-chat", model: "deepseek-reasoner", req: &wire.Request{Tools: tools[:1], Reasoning: &wire.ReasoningConfig{Effort: "low"}, Messages: []wire.Message{
			user(text("q")),
			asst(reason(wire.Reasoning{Protocol: wire.OpenAIChat, Text: "I should "}), reason(wire.Reasoning{Protocol: wire.OpenAIChat, Text: "search."}),
				call("c1", "web_search", `{"query":"q"}`)),
			tool(result("c1", text("r"))),
			asst(reason(wire.Reasoning{Protocol: wire.OpenAIChat}), text("done")),
		}}},
		{name: "reasoning-others", model: "claude-sonnet-4-5", req: &wire.Request{Tools: tools[:2], Reasoning: &wire.ReasoningConfig{Adaptive: true}, Messages: []wire.Message{
			user(text("q")),
			asst(reason(wire.Reasoning{Protocol: wire.AnthropicMessages, Text: "thinking <hard>", Signature: "sig=="}),
				reason(wire.Reasoning{Protocol: wire.AnthropicMessages, Redacted: "xyz"}), call("c1", "web_search", `{"query":"q"}`)),
			tool(result("c1", text("r"))),
			asst(reason(wire.Reasoning{Protocol: wire.OpenAIResponses, ID: "rs_1", Summary: []string{"s1", "s2"}, Encrypted: "enc"}), text("mid"),
				reason(wire.Reasoning{Protocol: wire.Gemini, Text: "thought", Signature: "gsig"}), call("c2", "get_time", `{}`)),
			tool(result("c2", text("noon"))),
			asst(reason(wire.Reasoning{Protocol: wire.OpenAIResponses, ID: "rs_2", Encrypted: "enc2"}), text("final")),
			asst(reason(wire.Reasoning{Protocol: wire.OpenAIChat, Text: "own"}), reason(wire.Reasoning{Protocol: wire.Gemini, Signature: "g2"}), text("mixed")),
		}}},
		{name: "server-parts", model: "gpt-4.1", req: &wire.Request{Messages: []wire.Message{
			user(text("search it")),
			asst(wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: "s1", Name: "web_search", Query: "nats \"jetstream\""}},
				wire.Part{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "s1", Sources: []wire.Source{{URL: "https://nats.io/?a=1&b=2", Title: "NATS <docs>"}, {URL: "https://b.example", Title: "B"}}}},
				wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: "s2", Name: wire.FetchName, URL: "https://nats.io/blog"}},
				wire.Part{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "s3", Error: &wire.SearchError{Code: "unavailable"}}},
				wire.Part{Kind: wire.PartText, Text: "NATS is a bus [1].", Citations: []wire.Citation{{URL: "https://nats.io/", Title: "NATS", Start: 0, End: 4}}}),
			user(text("more")),
		}}},
		{name: "ids", model: "gemini-3-pro-preview", req: &wire.Request{Tools: tools[:2], Messages: []wire.Message{
			user(text("ids")),
			asst(call("gcall_0_web_search", "web_search", `{"query":"a"}`), call("", "get_time", ``), call("c3", "get_time", `not json`)),
			tool(result("gcall_0_web_search", text("a")), result(""),
				wire.Part{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: "c3", IsError: true}}),
			asst(reason(wire.Reasoning{Protocol: wire.OpenAIResponses, Summary: []string{"only summary"}}),
				reason(wire.Reasoning{Protocol: wire.Gemini, Signature: "sig-g"}), call("c4", "web_search", `{"query":"b"}`), text("")),
			tool(result("c4", text(""))),
			asst(wire.Part{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "s9"}}),
		}}},
		{name: "native-search", model: "kimi-k2.5-preview", req: &wire.Request{Search: &llm.SearchOptions{}, Tools: tools[:1], Stream: true,
			Messages: []wire.Message{user(text("search natively"))}}},
		{name: "native-search-thinking-set", model: "kimi-k2.5", req: &wire.Request{Search: &llm.SearchOptions{},
			Params:   map[string]json.RawMessage{"thinking": json.RawMessage(`{"type":"enabled"}`)},
			Messages: []wire.Message{user(text("search natively"))}}},
		{name: "native-search-no-tools", model: "glm-4.6", req: &wire.Request{Search: &llm.SearchOptions{}, Messages: []wire.Message{user(text("search"))}}},
	}
	// Every recorded client request a client codec reads.
	decoders := []struct {
		name string
		dec  func([]byte) (*wire.Request, error)
	}{{"chat", openaichat.Client.DecodeRequest}, {"responses", responses.Client.DecodeRequest}, {"anthropic", anthropic.Client.DecodeRequest}}
	paths, err := fs.Glob(fixtures.FS(), "*/*.request.json")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		body := fixtures.Read(p)
		for _, d := range decoders {
			r, err := d.dec(body)
			if err != nil {
				continue
			}
			model := r.Model
			if model == "" {
				model = "fixture-model"
			}
			cases = append(cases, goldenCase{name: d.name + ":" + p, model: model, req: r})
		}
	}
	return cases
}

// goldenBodies encodes every case with every encoder: the body, or the error's text.
func goldenBodies(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range goldenRequests(t) {
		for name, enc := range goldenEncoders {
			b, err := enc.EncodeRequest(c.req, c.model)
			if err != nil {
				out[c.name+" @ "+name] = "error: " + err.Error()
				continue
			}
			out[c.name+" @ "+name] = string(b)
		}
	}
	return out
}

// Every request encoder renders the golden table byte for byte as the encoders
// before the typed request encoding did (testdata/request_golden.json was made by
// them): a provider, a prompt cache and the stored jobs see the same bytes.
func TestRequestEncodingMatchesGolden(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "request_golden.json")
	got := goldenBodies(t)
	if *updateGolden {
		b, err := json.MarshalIndent(got, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 200 {
		t.Fatalf("golden table has only %d bodies", len(want))
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: no longer encoded", k)
			continue
		}
		if g != want[k] {
			i := 0
			for i < len(g) && i < len(want[k]) && g[i] == want[k][i] {
				i++
			}
			t.Errorf("%s: differs at byte %d\n got: …%s\nwant: …%s", k, i, clipAt(g, i), clipAt(want[k], i))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: not in the golden table (run with -update-request-golden before changing an encoder)", k)
		}
	}
	// The table covers what it claims: tool calls, tool results, reasoning_content,
	// multi-part content, files and stream options all reach the Chat model's bodies.
	var chat bytes.Buffer
	for k, v := range want {
		if strings.HasSuffix(k, " @ chat-model") {
			chat.WriteString(v)
		}
	}
	for _, s := range []string{`"tool_calls"`, `"role":"tool"`, `"reasoning_content"`, `"image_url"`, `"type":"file"`, `"stream_options"`, `"tool_choice"`, `"content":null`, `"role":"system"`} {
		if !bytes.Contains(chat.Bytes(), []byte(s)) {
			t.Errorf("no Chat model body in the golden table has %s", s)
		}
	}
}

// clipAt is up to 80 bytes of s from i.
func clipAt(s string, i int) string {
	return s[max(0, i-20):min(len(s), i+80)]
}
