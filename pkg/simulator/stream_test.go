package simulator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// simClient serves a simulator and returns an official SDK client pointed at it.
// done reports whether the simulator has returned from the latest request.
func simClient(t *testing.T) (client openai.Client, url string, done *atomic.Bool) {
	t.Helper()
	sim := simulator.New(simulator.Options{})
	done = new(atomic.Bool)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done.Store(false)
		sim.ServeHTTP(w, r)
		done.Store(true)
	}))
	t.Cleanup(srv.Close)
	client = openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("sim-key"), option.WithMaxRetries(0))
	return client, srv.URL, done
}

var webSearchTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name: "web_search",
	Parameters: shared.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"query": map[string]any{"type": "string"}, "engine": map[string]any{"type": "string", "enum": []string{"glm", "google"}}},
		"required":   []string{"query", "engine"},
	},
})

// TestStreamMatchesWholeAnswer: the SDK's stream accumulator rebuilds, from the
// streamed chunks, the message, tool calls, finish reason and usage of the answer the
// simulator sends whole for the same request.
func TestStreamMatchesWholeAnswer(t *testing.T) {
	t.Parallel()
	client, _, _ := simClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A search call, answered with a tool result, for the "answer from results" case.
	searchReq := openai.ChatCompletionNewParams{
		Model:    "sim-scripted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what is the weather in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{webSearchTool},
	}
	searched, err := client.Chat.Completions.New(ctx, searchReq)
	if err != nil || len(searched.Choices) == 0 || len(searched.Choices[0].Message.ToolCalls) == 0 {
		t.Fatalf("search call: %v %+v", err, searched)
	}
	call := searched.Choices[0].Message.ToolCalls[0]
	results := "Web search results for \"weather in Paris\":\n\nParis is mild today, 18 °C. [1] Rain later. [2]\n\nSources:\n[1] Météo Paris (https://meteo.example/paris)\n[2] Weather (https://weather.example/fr)"

	cases := []struct {
		name     string
		messages []openai.ChatCompletionMessageParamUnion
		tools    bool
		finish   string
	}{
		{"plain answer", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a joke, sim:nosearch")}, false, "stop"},
		{"chinese answer", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("给我讲个笑话，要短一点")}, false, "stop"},
		{"one search call", searchReq.Messages, true, "tool_calls"},
		{"parallel search calls", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("latest news on Go? sim:calls=3 sim:engine=google")}, true, "tool_calls"},
		{"answer from results", []openai.ChatCompletionMessageParamUnion{
			searchReq.Messages[0], searched.Choices[0].Message.ToParam(), openai.ToolMessage(results, call.ID),
		}, true, "stop"},
		{"malformed arguments, invalid UTF-8 in the text", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("search \xff\xfe news sim:badargs")}, true, "tool_calls"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "sim-scripted", Messages: c.messages}
			if c.tools {
				params.Tools = []openai.ChatCompletionToolUnionParam{webSearchTool}
			}
			whole, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}

			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			chunks := 0
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("chunk %d rejected by the accumulator: %s", chunks, stream.Current().RawJSON())
				}
				chunks++
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Choices) != 1 {
				t.Fatalf("accumulated %d choices", len(acc.Choices))
			}
			got, want := acc.Choices[0], whole.Choices[0]
			if got.FinishReason != c.finish || want.FinishReason != c.finish {
				t.Errorf("finish reason: streamed %q, whole %q, want %q", got.FinishReason, want.FinishReason, c.finish)
			}
			if got.Message.Role != "assistant" || got.Message.Content != want.Message.Content {
				t.Errorf("message: streamed %q %q, whole %q", got.Message.Role, got.Message.Content, want.Message.Content)
			}
			if len(got.Message.ToolCalls) != len(want.Message.ToolCalls) {
				t.Fatalf("streamed %d tool calls, whole %d", len(got.Message.ToolCalls), len(want.Message.ToolCalls))
			}
			// Ids derive from a hash of the request body, which differs by "stream".
			streamHash, _ := strings.CutPrefix(acc.ID, "chatcmpl-sim-")
			wholeHash, _ := strings.CutPrefix(whole.ID, "chatcmpl-sim-")
			for i, tc := range want.Message.ToolCalls {
				g := got.Message.ToolCalls[i]
				if strings.Replace(g.ID, streamHash, wholeHash, 1) != tc.ID || g.Type != tc.Type || g.Function.Name != tc.Function.Name || g.Function.Arguments != tc.Function.Arguments {
					t.Errorf("tool call %d: streamed %s %s %s(%s), whole %s %s %s(%s)", i,
						g.ID, g.Type, g.Function.Name, g.Function.Arguments, tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments)
				}
			}
			u := acc.Usage
			if acc.Model != whole.Model || u.CompletionTokens != whole.Usage.CompletionTokens || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("streamed model %q usage %d+%d=%d; whole %q %d+%d=%d", acc.Model, u.PromptTokens, u.CompletionTokens, u.TotalTokens,
					whole.Model, whole.Usage.PromptTokens, whole.Usage.CompletionTokens, whole.Usage.TotalTokens)
			}
			if pieces := len(want.Message.Content) + len(want.Message.ToolCalls); chunks < 3 || pieces > 0 && chunks < 4 {
				t.Errorf("only %d chunks", chunks)
			}
		})
	}
}

// TestStreamWire checks the raw events against the shapes the real API sends.
func TestStreamWire(t *testing.T) {
	t.Parallel()
	_, url, _ := simClient(t)
	events := func(t *testing.T, body string) []string {
		t.Helper()
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
		}
		var out []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				t.Fatalf("not a data line: %q", line)
			}
			out = append(out, data)
		}
		return out
	}
	type chunk struct {
		ID      string          `json:"id"`
		Object  string          `json:"object"`
		Created int64           `json:"created"`
		Usage   json.RawMessage `json:"usage"`
		Choices []struct {
			Index        int                        `json:"index"`
			Delta        map[string]json.RawMessage `json:"delta"`
			FinishReason *string                    `json:"finish_reason"`
		} `json:"choices"`
	}
	decode := func(t *testing.T, evs []string) []chunk {
		t.Helper()
		if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" {
			t.Fatalf("events %q: want chunks then [DONE]", evs)
		}
		var cs []chunk
		for _, e := range evs[:len(evs)-1] {
			var c chunk
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatalf("%v: %s", err, e)
			}
			if c.Object != "chat.completion.chunk" || c.ID != cs0(cs, c).ID || c.Created != cs0(cs, c).Created {
				t.Errorf("chunk header differs: %s", e)
			}
			cs = append(cs, c)
		}
		return cs
	}

	t.Run("content without usage", func(t *testing.T) {
		evs := events(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello there, sim:nosearch"}]}`)
		cs := decode(t, evs)
		if string(cs[0].Choices[0].Delta["role"]) != `"assistant"` || string(cs[0].Choices[0].Delta["content"]) != `""` {
			t.Errorf("first chunk %s", evs[0])
		}
		last := cs[len(cs)-1]
		if len(last.Choices) != 1 || last.Choices[0].FinishReason == nil || *last.Choices[0].FinishReason != "stop" || len(last.Choices[0].Delta) != 0 {
			t.Errorf("last chunk %s", evs[len(evs)-2])
		}
		for i, c := range cs {
			if c.Usage != nil {
				t.Errorf("chunk %d has usage without include_usage: %s", i, evs[i])
			}
			if i > 0 && i < len(cs)-1 && (len(c.Choices[0].Delta) != 1 || c.Choices[0].FinishReason != nil) {
				t.Errorf("chunk %d: want a content delta only: %s", i, evs[i])
			}
		}
	})

	t.Run("tool calls with usage", func(t *testing.T) {
		evs := events(t, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"search the news sim:calls=2"}],"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}`)
		cs := decode(t, evs)
		if string(cs[0].Choices[0].Delta["content"]) != "null" {
			t.Errorf("first chunk of a tool-call answer: %s", evs[0])
		}
		usage := cs[len(cs)-1]
		if len(usage.Choices) != 0 || !strings.Contains(string(usage.Usage), `"total_tokens"`) || !strings.Contains(evs[len(evs)-2], `"choices":[]`) {
			t.Errorf("usage chunk %s", evs[len(evs)-2])
		}
		finish := cs[len(cs)-2]
		if finish.Choices[0].FinishReason == nil || *finish.Choices[0].FinishReason != "tool_calls" || string(finish.Usage) != "null" {
			t.Errorf("finish chunk %s", evs[len(evs)-3])
		}
		var opened []int
		for i, c := range cs[1 : len(cs)-2] {
			var tcs []map[string]json.RawMessage
			if err := json.Unmarshal(c.Choices[0].Delta["tool_calls"], &tcs); err != nil || len(tcs) != 1 {
				t.Fatalf("chunk %d: want one tool_calls delta: %s", i+1, evs[i+1])
			}
			var idx int
			json.Unmarshal(tcs[0]["index"], &idx)
			if _, ok := tcs[0]["id"]; ok {
				if string(tcs[0]["type"]) != `"function"` || !strings.Contains(string(tcs[0]["function"]), `"name":"web_search","arguments":""`) {
					t.Errorf("opening delta %s", evs[i+1])
				}
				opened = append(opened, idx)
			} else if len(opened) == 0 || opened[len(opened)-1] != idx || strings.Contains(string(tcs[0]["function"]), `"name"`) {
				t.Errorf("argument delta %s", evs[i+1])
			}
		}
		if !slices.Equal(opened, []int{0, 1}) {
			t.Errorf("tool calls opened in order %v, want [0 1]", opened)
		}
	})
}

// cs0 is the first chunk, or c itself when there is none yet.
func cs0[T any](cs []T, c T) T {
	if len(cs) == 0 {
		return c
	}
	return cs[0]
}

// TestStreamTokenDelay: with sim:token-delay the first content delta reaches the
// client while the simulator is still writing the answer.
func TestStreamTokenDelay(t *testing.T) {
	t.Parallel()
	client, _, done := simClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "sim-scripted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a joke about compilers, sim:nosearch sim:token-delay=20ms")},
	})
	var deltas []string
	firstBeforeDone := false
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) == 0 || c.Choices[0].Delta.Content == "" {
			continue
		}
		if len(deltas) == 0 {
			firstBeforeDone = !done.Load()
		}
		deltas = append(deltas, c.Choices[0].Delta.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(deltas) < 10 {
		t.Fatalf("%d content deltas: %q", len(deltas), deltas)
	}
	if !firstBeforeDone {
		t.Error("the first delta arrived after the simulator had written the whole answer")
	}
}
