package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// chatClient is a caller of an OpenAI-compatible provider at base, spoken to in Chat.
func chatClient(name, base, k string) upstreamtest.Chat {
	return upstreamtest.Chat{Caller: upstream.New(openaichat.Model, name, base, k, nil, upstream.Options{})}
}

func simClient(t *testing.T) upstreamtest.Chat {
	t.Helper()
	hs, url, err := simulator.New(simulator.Options{}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	return chatClient("sim", url+"/v1", "sk-test-secret")
}

// A streamed call assembles the same answer as the whole one (text, tool calls with
// their arguments rebuilt from fragments, finish reason), and onDelta receives the
// text piece by piece, in order.
func TestChatStreamedMatchesWhole(t *testing.T) {
	t.Parallel()
	c := simClient(t)
	for name, body := range map[string]string{
		"text":       `{"model":"sim-scripted","messages":[{"role":"user","content":"Tell me a story sim:token-delay=1ms"}]}`,
		"tool calls": `{"model":"sim-scripted","messages":[{"role":"user","content":"What is new in Go? sim:calls=2"}],"tools":[` + webSearchTool + `]}`,
	} {
		t.Run(name, func(t *testing.T) {
			whole, err := c.Complete(context.Background(), []byte(body), nil)
			if err != nil {
				t.Fatal(err)
			}
			var deltas []string
			streamed, err := c.Complete(context.Background(), []byte(body), func(d llm.Delta) { deltas = append(deltas, d.Text) })
			if err != nil {
				t.Fatal(err)
			}
			var wm, sm llm.Message
			json.Unmarshal(whole.Message, &wm)
			if err := json.Unmarshal(streamed.Message, &sm); err != nil {
				t.Fatal(err)
			}
			if llm.Text(sm.Content) != llm.Text(wm.Content) || strings.Join(deltas, "") != llm.Text(wm.Content) {
				t.Errorf("text: streamed %q, deltas %q, whole %q", llm.Text(sm.Content), deltas, llm.Text(wm.Content))
			}
			if wt := llm.Text(wm.Content); wt != "" && len(deltas) < 2 {
				t.Errorf("%d deltas for %q: not streamed", len(deltas), wt)
			}
			// The simulator derives ids from the request body, which differs by the
			// stream fields: the tool calls are compared without them (withoutIDs).
			if ws, ss := withoutIDs(t, whole), withoutIDs(t, streamed); ws != ss || len(sm.ToolCalls) != len(wm.ToolCalls) {
				t.Errorf("tool calls: streamed %s, whole %s", ss, ws)
			}
			if streamed.FinishReason != whole.FinishReason || streamed.Model != whole.Model {
				t.Errorf("streamed %s/%s, whole %s/%s", streamed.FinishReason, streamed.Model, whole.FinishReason, whole.Model)
			}
			if streamed.Usage.TotalTokens == 0 {
				t.Error("no usage: stream_options.include_usage not sent or not read")
			}
			if len(wm.ToolCalls) == 0 && string(sm.Content) == "null" {
				t.Error("a text answer's content is null")
			}
			if len(wm.ToolCalls) > 0 && !strings.Contains(string(streamed.Message), `"content":null`) {
				t.Errorf("a tool-call answer's content should stay null: %s", streamed.Message)
			}
		})
	}
}

// A recorded OpenRouter stream (comment lines, annotations in the first delta, usage
// in a last chunk that repeats the finish reason) is read whole: its text, finish
// reason, usage and model.
func TestChatStreamFixture(t *testing.T) {
	t.Parallel()
	sse := fixtures.Read("openrouter/pydantic-server-tool-web-search-annotations-stream.sse")
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	defer hs.Close()
	c := chatClient("openrouter", hs.URL, "")
	var text strings.Builder
	comp, err := c.Complete(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), func(d llm.Delta) { text.WriteString(d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(comp.Message, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Content != text.String() || !strings.Contains(msg.Content, "github.com/pydantic/pydantic-ai") {
		t.Errorf("content %q, deltas %q", msg.Content, text.String())
	}
	if comp.FinishReason != "stop" || comp.Usage.TotalTokens != 2370 || comp.Model != "deepseek/deepseek-chat" {
		t.Errorf("finish %q, usage %+v, model %q", comp.FinishReason, comp.Usage, comp.Model)
	}

	// The second recording: gpt-4.1-mini through OpenRouter, usage in the last chunk.
	sse2 := fixtures.Read("openrouter/pydantic-server-tool-web-search-usage-stream.sse")
	hs2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse2)
	}))
	defer hs2.Close()
	text.Reset()
	comp, err = chatClient("openrouter", hs2.URL, "").Complete(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), func(d llm.Delta) { text.WriteString(d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	var m2 llm.Message
	json.Unmarshal(comp.Message, &m2)
	if got := llm.Text(m2.Content); got == "" || got != text.String() || comp.Usage.TotalTokens != 8204 || comp.FinishReason != "stop" {
		t.Errorf("content %q, deltas %q, usage %+v, finish %q", got, text.String(), comp.Usage, comp.FinishReason)
	}
}

// An error object inside the stream, a stream cut before its end (a broken stream:
// 502) and a chunk that does not read (no status: the provider was not understood)
// are *llm.Error values with a retry decision; none leaks the key.
func TestChatStreamErrors(t *testing.T) {
	t.Parallel()
	first := `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n"
	for name, tc := range map[string]struct {
		body      string
		status    int
		retryable bool
	}{
		"in-band 502": {first + `data: {"error":{"message":"Upstream overloaded sk-test-secret","code":502}}` + "\n\n", 502, true},
		"in-band 400": {first + `data: {"error":{"message":"context too long","code":400}}` + "\n\n", 400, false},
		"cut":         {first, http.StatusBadGateway, true},
		"garbled":     {first + "data: {not json\n\n", 0, true},
	} {
		t.Run(name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte(tc.body))
			}))
			defer hs.Close()
			c := chatClient("p", hs.URL, "sk-test-secret")
			var got string
			_, err := c.Complete(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), func(d llm.Delta) { got += d.Text })
			var le *llm.Error
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T), want *llm.Error", err, err)
			}
			if le.Status != tc.status || le.Retryable() != tc.retryable {
				t.Errorf("status %d retryable %v, want %d %v (%v)", le.Status, le.Retryable(), tc.status, tc.retryable, err)
			}
			if strings.Contains(err.Error(), "sk-test-secret") {
				t.Errorf("key in error: %v", err)
			}
			if got != "Hel" {
				t.Errorf("deltas before the failure: %q", got)
			}
		})
	}
}

// A refusal before the stream starts (HTTP 429) is read as the whole-answer path does.
func TestChatStreamHTTPError(t *testing.T) {
	t.Parallel()
	c := simClient(t)
	_, err := c.Complete(context.Background(), []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"hi sim:model-429"}]}`), func(llm.Delta) {})
	var le *llm.Error
	if !errors.As(err, &le) || le.Status != http.StatusTooManyRequests || !le.Retryable() {
		t.Fatalf("got %v", err)
	}
}

// A provider's own message fields survive streaming (DeepSeek's and Kimi's
// reasoning_content, concatenated, must go back to them on the next hop), and tool
// calls whose fragments interleave are rebuilt by index, in index order.
func TestChatStreamKeepsProviderFields(t *testing.T) {
	t.Parallel()
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","model":"kimi","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	body := chunk(`{"role":"assistant","reasoning_content":"Think "}`, "null") +
		chunk(`{"reasoning_content":"twice."}`, "null") +
		chunk(`{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{\"y\""}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":":2}"}}]}`, "null") +
		chunk(`{}`, `"tool_calls"`) +
		`data: {"id":"c1","model":"kimi","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}` + "\n\ndata: [DONE]\n\n"
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(body))
	}))
	defer hs.Close()
	var deltas int
	comp, err := chatClient("kimi", hs.URL, "").Complete(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), func(llm.Delta) { deltas++ })
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Content   *string        `json:"content"`
		Reasoning string         `json:"reasoning_content"`
		ToolCalls []llm.ToolCall `json:"tool_calls"`
	}
	if err := json.Unmarshal(comp.Message, &msg); err != nil {
		t.Fatal(err)
	}
	calls, _ := json.Marshal(msg.ToolCalls)
	want := `[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{\"y\":2}"}}]`
	if msg.Content != nil || msg.Reasoning != "Think twice." || string(calls) != want || deltas != 0 {
		t.Errorf("message %s (%d text deltas)", comp.Message, deltas)
	}
	if comp.FinishReason != "tool_calls" || comp.Usage.TotalTokens != 12 || comp.Model != "kimi" {
		t.Errorf("completion %+v", comp)
	}
}
