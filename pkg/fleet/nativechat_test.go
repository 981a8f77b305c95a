package fleet_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

const kimiQuestion = "Search the web for the latest news about NATS JetStream"

// A Kimi model with native search (sim-kimi-native) searches with Kimi's own
// $web_search: the caller echoes the call, the answer's markdown links become the
// fleet's [n] markers and sources, and the job record counts the search like the
// fleet's: a trace entry (engine native:kimi.chat), ¥0.03 in the search cost, the
// tokens of both rounds.
func TestKimiNativeSearchInJobRecord(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	_, b, _ := f.Do(t, "GET", "/v1/models", nil)
	if !strings.Contains(string(b), `"`+demo.ModelKimiNative+`"`) {
		t.Errorf("GET /v1/models does not list %s: %s", demo.ModelKimiNative, b)
	}
	status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{
		"model": demo.ModelKimiNative, "messages": []any{map[string]any{"role": "user", "content": kimiQuestion}},
	})
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil || status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	content := fleettest.Content(resp)
	msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	anns, _ := msg["annotations"].([]any)
	// The simulated search is about the question: the answer links pages made from it.
	if !strings.Contains(content, "(https://news.example.com/search-the-web-for-the-latest-news-about-nats-jetstream)[1]") || !strings.Contains(content, "[3]") || len(anns) != 3 || msg["searchfleet_native"] != nil {
		t.Fatalf("answer %q, message %v", content, msg)
	}
	if u := anns[1].(map[string]any)["url_citation"].(map[string]any)["url"]; u != "https://wiki.example.org/search-the-web-for-the-latest-news-about-nats-jetstream" {
		t.Errorf("second citation %v", u)
	}
	sources := resp["searchfleet"].(map[string]any)["sources"].([]any)
	if title, _ := sources[0].(map[string]any)["title"].(string); len(sources) != 3 || !strings.Contains(title, kimiQuestion) {
		t.Errorf("sources %v", sources)
	}
	st := f.Sim.Stats().Requests
	if st["model_native_search"] != 1 || st["model_kimi_echo"] != 1 {
		t.Errorf("simulator: %d $web_search calls, %d echoes; want 1 and 1", st["model_native_search"], st["model_kimi_echo"])
	}
	j, err := f.Store.Jobs.GetJob(context.Background(), jobID(t, resp))
	if err != nil {
		t.Fatal(err)
	}
	var usage map[string]any
	json.Unmarshal(j.Usage, &usage)
	cost, _ := usage["search_cost_usd"].(float64)
	if usage["searches"] != 1.0 || math.Abs(cost-0.03*0.14) > 1e-9 || usage["model_calls"] != 1.0 || usage["model_protocol"] != "openai-chat" {
		t.Errorf("usage %s", j.Usage)
	}
	if usage["prompt_tokens"] != float64(178+8182) || usage["completion_tokens"] != float64(1+1971) {
		t.Errorf("usage %s, want both rounds' tokens", j.Usage)
	}
	var trace []map[string]any
	json.Unmarshal(j.Trace, &trace)
	if len(trace) != 1 || trace[0]["engine"] != "native:kimi.chat" || len(trace[0]["sources"].([]any)) != 3 {
		t.Errorf("trace %s", j.Trace)
	}
}

// The Kimi native model answers with citations in every client protocol, streamed
// too: the streamed Chat answer accumulates to the stored one.
func TestKimiNativeSearchClientProtocols(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	ac, oc := anthropicClient(f), openaiClient(f)
	msg, err := ac.Messages.New(ctx(t), anthropic.MessageNewParams{Model: demo.ModelKimiNative, MaxTokens: 500,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(kimiQuestion))},
		Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	kinds := map[string]int{}
	for _, b := range msg.Content {
		kinds[b.Type]++
		text += b.Text
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || kinds["server_tool_use"] != 1 || !strings.Contains(text, "[1]") {
		t.Errorf("Messages answer on %s: %s", demo.ModelKimiNative, msg.RawJSON())
	}
	resp, err := oc.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.ModelKimiNative,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(kimiQuestion)},
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusCompleted || resp.Output[0].Type != "web_search_call" || !strings.Contains(resp.OutputText(), "[2]") {
		t.Errorf("Responses answer on %s: %s", demo.ModelKimiNative, resp.RawJSON())
	}

	st := oc.Chat.Completions.NewStreaming(ctx(t), openai.ChatCompletionNewParams{
		Model:    demo.ModelKimiNative,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(kimiQuestion + " (streamed)")},
	})
	var acc openai.ChatCompletionAccumulator
	var job string
	for st.Next() {
		ch := st.Current()
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator refused %s", ch.RawJSON())
		}
		job = strings.TrimPrefix(ch.ID, "chatcmpl-")
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	status, stored, _ := storedJob(t, f, job)
	var want struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	json.Unmarshal(stored, &want)
	if status != "completed" || len(want.Choices) == 0 {
		t.Fatalf("job %s: %s", status, stored)
	}
	if got := acc.Choices[0].Message.Content; got != want.Choices[0].Message.Content || !strings.Contains(got, ")[1]") {
		t.Errorf("accumulated %q, stored %q", got, want.Choices[0].Message.Content)
	}
	if !slices.Contains([]string{"stop"}, acc.Choices[0].FinishReason) {
		t.Errorf("finish %q", acc.Choices[0].FinishReason)
	}
}

// A GLM model with native search (sim-glm-native) searches with GLM's own web_search
// tool: its ref_N markers become [n], its results the sources, one search at ¥0.03.
func TestGLMNativeSearchInJobRecord(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{
		"model": demo.ModelGLMNative, "messages": []any{map[string]any{"role": "user", "content": "搜索2025年4月的重要财经新闻"}},
	})
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil || status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	content := fleettest.Content(resp)
	// The simulated search is about the question: the answer quotes pages made from it.
	if !strings.HasPrefix(content, "(simulated answer)") || !strings.Contains(content, "搜索2025年4月的重要财经新闻, simulated result 1 of 5.[1]") || strings.Contains(content, "ref_") {
		t.Fatalf("answer %q", content)
	}
	sources := resp["searchfleet"].(map[string]any)["sources"].([]any)
	if u, _ := sources[0].(map[string]any)["url"].(string); len(sources) != 3 || !strings.HasSuffix(u, ".example.org/2025-4") && !strings.HasSuffix(u, ".example.com/2025-4") && !strings.HasSuffix(u, ".example.net/2025-4") {
		t.Errorf("sources %v", sources)
	}
	j, err := f.Store.Jobs.GetJob(context.Background(), jobID(t, resp))
	if err != nil {
		t.Fatal(err)
	}
	var usage map[string]any
	json.Unmarshal(j.Usage, &usage)
	cost, _ := usage["search_cost_usd"].(float64)
	if usage["searches"] != 1.0 || math.Abs(cost-0.03*0.14) > 1e-9 || usage["model_calls"] != 1.0 {
		t.Errorf("usage %s", j.Usage)
	}
	var trace []map[string]any
	json.Unmarshal(j.Trace, &trace)
	if len(trace) != 1 || trace[0]["engine"] != "native:glm.chat" || len(trace[0]["sources"].([]any)) != 5 {
		t.Errorf("trace %s", j.Trace)
	}
}
