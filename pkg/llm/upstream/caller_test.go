package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

const key = "sk-upstream-secret-42"

// protocol is one model protocol as the simulator serves it.
type protocol struct {
	name string
	api  wire.ModelAPI
	base func(sim string) string
	// path is the prefix of the protocol's endpoint, for standing faults.
	path string
}

var protocols = []protocol{
	{"openai-responses", responses.Model, func(s string) string { return s + "/v1" }, "/v1/responses"},
	{"anthropic-messages", anthropic.Model, func(s string) string { return s }, "/v1/messages"},
	{"gemini", gemini.Model, func(s string) string { return s }, "/v1beta/models/"},
	{"openai-chat", openaichat.Model, func(s string) string { return s + "/v1" }, "/v1/chat/completions"},
}

// start runs a simulator and returns it with a caller of p pointed at it.
func start(t *testing.T, p protocol, k string) (*simulator.Server, upstreamtest.Chat) {
	t.Helper()
	sim := simulator.New(simulator.Options{})
	hs, url, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	return sim, upstreamtest.Chat{Caller: upstream.New(p.api, "sim-"+p.name, p.base(url), k, &http.Client{Timeout: 10 * time.Second}, upstream.Options{})}
}

const webSearchTool = `{"type":"function","function":{"name":"web_search","description":"Search the web","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}`
const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"The weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`

// body is a Chat request of the chain: messages (JSON values) and tools.
func body(msgs []string, tools ...string) []byte {
	b := `{"model":"sim-scripted","messages":[` + strings.Join(msgs, ",") + `]`
	if len(tools) > 0 {
		b += `,"tools":[` + strings.Join(tools, ",") + `]`
	}
	return []byte(b + `}`)
}

func user(text string) string {
	b, _ := json.Marshal(map[string]string{"role": "user", "content": text})
	return string(b)
}

func toolResult(id, content string) string {
	b, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": id, "content": content})
	return string(b)
}

// answer is a Completion's message, decoded.
type answer struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []llm.ToolCall `json:"tool_calls"`
}

func decode(t *testing.T, c *llm.Completion) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal(c.Message, &a); err != nil || a.Role != "assistant" {
		t.Fatalf("message %s: %v", c.Message, err)
	}
	return a
}

func (a answer) text() string {
	if a.Content == nil {
		return ""
	}
	return *a.Content
}

const question = "Search the web for the latest news about NATS JetStream"

// results are search results as the chain gives them to the model: numbered sources.
func results(n int) string {
	var b strings.Builder
	b.WriteString("Web search results for \"NATS JetStream news\":\n\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "[%d] NATS JetStream release notes, part %d of the long-running series on streaming (https://nats.io/blog/part-%d)\n", i, i, i)
	}
	return b.String()
}

// Two hops in each protocol: the model calls web_search (the tool reached it in the
// protocol's shape), the call comes back as a Chat tool call; the result goes back
// with its id and the model answers citing it.
func TestTwoHopChainCites(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			sim, c := start(t, p, key)
			hop1, err := c.Complete(context.Background(), body([]string{user(question)}, webSearchTool), nil)
			if err != nil {
				t.Fatal(err)
			}
			a := decode(t, hop1)
			if hop1.FinishReason != "tool_calls" || len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Name != "web_search" || a.ToolCalls[0].ID == "" {
				t.Fatalf("hop 1: %s (%s)", hop1.Message, hop1.FinishReason)
			}
			var args struct {
				Query string `json:"query"`
			}
			if json.Unmarshal([]byte(a.ToolCalls[0].Function.Arguments), &args) != nil || args.Query != question {
				t.Errorf("arguments %q", a.ToolCalls[0].Function.Arguments)
			}
			if sim.Stats().Requests["model_offered_web_search"] != 1 {
				t.Errorf("the simulator did not see web_search offered: %v", sim.Stats().Requests)
			}
			hop2, err := c.Complete(context.Background(), body([]string{user(question), string(hop1.Message), toolResult(a.ToolCalls[0].ID, results(2))}, webSearchTool), nil)
			if err != nil {
				t.Fatal(err)
			}
			a2 := decode(t, hop2)
			if hop2.FinishReason != "stop" || !strings.Contains(a2.text(), "[1]") || !strings.Contains(a2.text(), "[2]") || len(a2.ToolCalls) != 0 {
				t.Errorf("hop 2: %s (%s)", hop2.Message, hop2.FinishReason)
			}
			if hop2.Usage.PromptTokens == 0 || hop2.Usage.CompletionTokens == 0 || hop2.Usage.TotalTokens != hop2.Usage.PromptTokens+hop2.Usage.CompletionTokens {
				t.Errorf("usage %+v", hop2.Usage)
			}
		})
	}
}

// Parallel calls keep distinct ids, and all their results go back in one turn.
func TestParallelToolCalls(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			_, c := start(t, p, key)
			q := question + " sim:calls=3"
			hop1, err := c.Complete(context.Background(), body([]string{user(q)}, webSearchTool), nil)
			if err != nil {
				t.Fatal(err)
			}
			a := decode(t, hop1)
			ids := map[string]bool{}
			msgs := []string{user(q), string(hop1.Message)}
			for _, tc := range a.ToolCalls {
				ids[tc.ID] = true
				msgs = append(msgs, toolResult(tc.ID, results(1)))
			}
			if len(a.ToolCalls) != 3 || len(ids) != 3 {
				t.Fatalf("calls %s", hop1.Message)
			}
			hop2, err := c.Complete(context.Background(), body(msgs, webSearchTool), nil)
			if err != nil {
				t.Fatal(err)
			}
			if a2 := decode(t, hop2); strings.Count(a2.text(), "[1]") != 3 {
				t.Errorf("answer from 3 results: %q", a2.text())
			}
		})
	}
}

// A client tool is offered beside web_search and its call comes back as the model
// made it; the client's result goes on to the model.
func TestClientToolsPassThrough(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			_, c := start(t, p, key)
			q := "What is the weather in Paris? sim:tool=get_weather"
			hop1, err := c.Complete(context.Background(), body([]string{user(q)}, weatherTool, webSearchTool), nil)
			if err != nil {
				t.Fatal(err)
			}
			a := decode(t, hop1)
			if hop1.FinishReason != "tool_calls" || len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Name != "get_weather" ||
				a.ToolCalls[0].Function.Arguments != `{"input":"What is the weather in Paris? sim:tool=get_weather"}` {
				t.Fatalf("hop 1: %s", hop1.Message)
			}
			hop2, err := c.Complete(context.Background(), body([]string{user(q), string(hop1.Message), toolResult(a.ToolCalls[0].ID, results(1))}, weatherTool, webSearchTool), nil)
			if err != nil {
				t.Fatal(err)
			}
			if a2 := decode(t, hop2); !strings.Contains(a2.text(), "[1]") {
				t.Errorf("answer from the client tool's result: %q", a2.text())
			}
		})
	}
}

// Streamed, the answer's text reaches onDelta in pieces and in order, and the
// Completion is the one the same call gives unstreamed; a tool-call hop streams no text.
func TestStreamingMatchesWhole(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			_, c := start(t, p, key)
			q := question + " sim:token-delay=1ms"
			hop1, err := c.Complete(context.Background(), body([]string{user(q)}, webSearchTool), nil)
			if err != nil {
				t.Fatal(err)
			}
			var deltas []string
			hop1s, err := c.Complete(context.Background(), body([]string{user(q)}, webSearchTool), func(d llm.Delta) { deltas = append(deltas, d.Text) })
			if err != nil {
				t.Fatal(err)
			}
			if withoutIDs(t, hop1s) != withoutIDs(t, hop1) || hop1s.FinishReason != hop1.FinishReason || len(deltas) != 0 {
				t.Errorf("tool-call hop streamed %s (%s), deltas %q; whole %s", hop1s.Message, hop1s.FinishReason, deltas, hop1.Message)
			}
			msgs := []string{user(q), string(hop1.Message), toolResult(decode(t, hop1).ToolCalls[0].ID, results(3))}
			whole, err := c.Complete(context.Background(), body(msgs, webSearchTool), nil)
			if err != nil {
				t.Fatal(err)
			}
			streamed, err := c.Complete(context.Background(), body(msgs, webSearchTool), func(d llm.Delta) { deltas = append(deltas, d.Text) })
			if err != nil {
				t.Fatal(err)
			}
			if string(streamed.Message) != string(whole.Message) || streamed.FinishReason != "stop" || streamed.Usage.CompletionTokens == 0 {
				t.Errorf("streamed %s (%s, %+v)\nwhole %s", streamed.Message, streamed.FinishReason, streamed.Usage, whole.Message)
			}
			if len(deltas) < 2 || strings.Join(deltas, "") != decode(t, whole).text() {
				t.Errorf("%d deltas %q, want the text %q in pieces", len(deltas), deltas, decode(t, whole).text())
			}
		})
	}
}

// withoutIDs renders a message with its tool call ids blanked: the simulator derives
// them from the request body, which says whether to stream.
func withoutIDs(t *testing.T, c *llm.Completion) string {
	a := decode(t, c)
	for i := range a.ToolCalls {
		a.ToolCalls[i].ID = ""
	}
	b, _ := json.Marshal(a)
	return string(b)
}

// Every error class maps to the retry decision: 429 with its Retry-After, 529
// (Anthropic's overloaded) and 500 retry, 400 does not, a missing key is a 401; the
// key never shows in an error.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			sim, c := start(t, p, key)
			for _, e := range []struct {
				status int
				after  time.Duration
				retry  bool
			}{{429, 2 * time.Second, true}, {529, 0, true}, {500, 0, true}, {503, 0, true}, {400, 0, false}} {
				sim.SetFault(p.path, e.status, e.after, 1)
				for _, stream := range []func(llm.Delta){nil, func(llm.Delta) {}} {
					if stream != nil {
						sim.SetFault(p.path, e.status, e.after, 1)
					}
					_, err := c.Complete(context.Background(), body([]string{user(question)}, webSearchTool), stream)
					var le *llm.Error
					if !errors.As(err, &le) || le.Status != e.status || le.Retryable() != e.retry || le.RetryAfter != e.after || le.Provider != "sim-"+p.name {
						t.Errorf("HTTP %d (stream %v): %#v", e.status, stream != nil, err)
						continue
					}
					if strings.Contains(le.Error(), key) {
						t.Errorf("the key shows in %q", le.Error())
					}
				}
			}
			if p.api == openaichat.Model {
				return // the simulator's Chat endpoint, like a local server, takes no key
			}
			_, nokey := start(t, p, "")
			_, err := nokey.Complete(context.Background(), body([]string{user(question)}), nil)
			var le *llm.Error
			if !errors.As(err, &le) || le.Status != http.StatusUnauthorized || le.Retryable() {
				t.Errorf("without a key: %v", err)
			}
		})
	}
}

// With native search, the fleet's web_search tool reaches Anthropic as its own
// web_search_20250305 server tool; the provider's searches come back as [n] markers
// and a native-search report with the protocol and the cost ($10 per 1,000); a client
// tool still goes as a client tool.
func TestNativeSearchForwarded(t *testing.T) {
	t.Parallel()
	p := protocols[1]
	sim := simulator.New(simulator.Options{})
	hs, url, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	c := upstreamtest.Chat{Caller: upstream.New(p.api, "claude", p.base(url), key, nil, upstream.Options{NativeSearch: true})}
	comp, err := c.Complete(context.Background(), body([]string{user(question)}, weatherTool, webSearchTool), nil)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Content string            `json:"content"`
		Native  *llm.NativeSearch `json:"searchfleet_native"`
	}
	json.Unmarshal(comp.Message, &m)
	if comp.FinishReason != "stop" || !strings.Contains(m.Content, "[1]") || m.Native == nil {
		t.Fatalf("answer %s", comp.Message)
	}
	if n := m.Native; n.Protocol != "anthropic.messages" || n.Requests != 1 || n.CostUSD != 0.01 || len(n.Sources) != 3 ||
		!strings.Contains(m.Content, question+", simulated result 1 of 5.[1]") {
		t.Errorf("native report %+v", n)
	}
	st := sim.Stats().Requests
	if st["model_native_search"] != 1 || st["model_offered_web_search"] != 0 {
		t.Errorf("the simulator saw %v: want the native tool, not the function tool", st)
	}
	// Streamed, the native stream gives the same kind of report; the deltas
	// are the answer's text before its markers.
	var deltas strings.Builder
	comp, err = c.Complete(context.Background(), body([]string{user(question)}, webSearchTool), func(d llm.Delta) { deltas.WriteString(d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	m.Native = nil
	json.Unmarshal(comp.Message, &m)
	if m.Native == nil || m.Native.Requests != 1 || m.Native.CostUSD != 0.01 || len(m.Native.Sources) == 0 || !strings.Contains(m.Content, "[1]") || deltas.Len() == 0 {
		t.Errorf("streamed native answer %s (deltas %d bytes)", comp.Message, deltas.Len())
	}
	if got := regexp.MustCompile(`\[\d+\]`).ReplaceAllString(m.Content, ""); got != deltas.String() {
		t.Errorf("the answer without its markers %q differs from the deltas %q", got, deltas.String())
	}
	// Without native search the same request offers the function tool.
	plain := upstreamtest.Chat{Caller: upstream.New(p.api, "claude", p.base(url), key, nil, upstream.Options{})}
	if _, err := plain.Complete(context.Background(), body([]string{user(question)}, weatherTool, webSearchTool), nil); err != nil {
		t.Fatal(err)
	}
	if st := sim.Stats().Requests; st["model_native_search"] != 2 || st["model_offered_web_search"] != 1 {
		t.Errorf("the simulator saw %v", st)
	}
}

// A stream that breaks off mid-answer (the recorded Anthropic stream cut in half, the
// connection dropped) is a retryable failure, never a half answer.
func TestBrokenStreamRetries(t *testing.T) {
	t.Parallel()
	rec := fixtures.Read("anthropic/pydantic-web-search-news-stream.sse")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write(rec[:len(rec)/2])
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	c := upstreamtest.Chat{Caller: upstream.New(anthropic.Model, "claude", srv.URL, key, nil, upstream.Options{})}
	var got strings.Builder
	_, err := c.Complete(context.Background(), body([]string{user(question)}), func(d llm.Delta) { got.WriteString(d.Text) })
	var le *llm.Error
	if !errors.As(err, &le) || !le.Retryable() || le.Status != http.StatusBadGateway {
		t.Fatalf("broken stream: %#v", err)
	}
}

// A native-search answer that pauses (the recorded pause_turn after 10 searches) is
// resumed with the paused content sent back exactly as it came (the recorded
// continuation request has it so), and the two recorded answers make one: 15 searches
// priced, the citations of the resumed part marked.
func TestPauseTurnContinues(t *testing.T) {
	t.Parallel()
	paused := fixtures.Read("anthropic/pydantic-pause-turn.0.response.json")
	answers := [][]byte{paused, fixtures.Read("anthropic/pydantic-pause-turn.1-continuation.response.json")}
	var bodies [][]byte
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, b)
		mu.Unlock()
		if n >= len(answers) {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"too many calls"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(answers[n])
	}))
	t.Cleanup(srv.Close)
	c := upstreamtest.Chat{Caller: upstream.New(anthropic.Model, "claude", srv.URL, key, nil, upstream.Options{NativeSearch: true})}
	comp, err := c.Complete(context.Background(), body([]string{user(question)}, webSearchTool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 {
		t.Fatalf("%d model calls, want 2", len(bodies))
	}
	var second, recorded struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(bodies[1], &second)
	json.Unmarshal(fixtures.Read("anthropic/pydantic-pause-turn.1-continuation.request.json"), &recorded)
	if len(second.Messages) != 2 || second.Messages[1].Role != "assistant" || !reflect.DeepEqual(second.Messages[1].Content, recorded.Messages[1].Content) {
		t.Errorf("the continuation does not send the paused content back as recorded")
	}
	var m struct {
		Content string            `json:"content"`
		Native  *llm.NativeSearch `json:"searchfleet_native"`
	}
	json.Unmarshal(comp.Message, &m)
	if comp.FinishReason != "stop" || m.Native == nil || m.Native.Requests != 15 || m.Native.CostUSD != 0.15 || len(m.Native.Searches) != 15 || !strings.Contains(m.Content, "[1]") {
		t.Errorf("joined answer: finish %s, native %+v", comp.FinishReason, m.Native)
	}
	if comp.Usage.PromptTokens == 0 || comp.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v", comp.Usage)
	}
}
