package fleet_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// Every demo main model answers a Chat client with a cited answer, whatever protocol
// it speaks: the chain's Chat request goes out in the model's protocol (the simulator
// decodes each with that protocol's rules), the web_search call and the results
// round trip in it, and the job's usage names the protocol.
func TestEveryModelProtocolAnswersCited(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	_, b, _ := f.Do(t, "GET", "/v1/models", nil)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	json.Unmarshal(b, &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	protocols := map[string]string{demo.Model: "openai-chat", demo.ModelResponses: "openai-responses", demo.ModelClaude: "anthropic-messages", demo.ModelGemini: "gemini", demo.ModelPerplexity: "perplexity-agent"}
	for model, protocol := range protocols {
		if !slices.Contains(ids, model) {
			t.Errorf("GET /v1/models lists %v, not %s", ids, model)
		}
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{
				// A question of its own: identical searches in flight at once would share one.
				"model": model, "messages": []any{map[string]any{"role": "user", "content": "Search the web for the latest news about NATS JetStream, for " + model}},
			})
			var resp map[string]any
			if err := json.Unmarshal(body, &resp); err != nil || status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			content := fleettest.Content(resp)
			if !strings.Contains(content, "[1]") || !strings.Contains(content, "(simulated answer)") {
				t.Fatalf("answer is not a cited answer from the search: %q", content)
			}
			msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			if anns, _ := msg["annotations"].([]any); len(anns) == 0 {
				t.Errorf("no url_citation annotations: %v", msg)
			}
			j, err := f.Store.Jobs.GetJob(context.Background(), jobID(t, resp))
			if err != nil {
				t.Fatal(err)
			}
			var usage map[string]any
			json.Unmarshal(j.Usage, &usage)
			if usage["model_protocol"] != protocol || usage["model_calls"] != 2.0 || usage["searches"] != 1.0 {
				t.Errorf("usage %s, want model_protocol %s, 2 model calls, 1 search", j.Usage, protocol)
			}
			if usage["prompt_tokens"] == 0.0 || usage["completion_tokens"] == 0.0 {
				t.Errorf("usage %s has no tokens", j.Usage)
			}
		})
	}
}

// Any client protocol drives any model protocol: an Anthropic client on the Gemini
// brain and a Responses client on the Claude brain get cited answers in their own
// protocol's shapes. The searches the fleet ran show as server tool calls when the
// request declared web_search; undeclared, as the real APIs would, only as citations
// and usage (a strict client fails on a call of a tool it did not declare).
func TestClientProtocolsOnOtherBrains(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	ac, oc := anthropicClient(f), openaiClient(f)
	msg, err := ac.Messages.New(ctx(t), anthropic.MessageNewParams{Model: demo.ModelGemini, MaxTokens: 500,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Search the web for the latest news about NATS JetStream"))}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	kinds := map[string]int{}
	for _, b := range msg.Content {
		kinds[b.Type]++
		text += b.Text
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || kinds["server_tool_use"] != 0 || kinds["web_search_tool_result"] != 0 ||
		len(msg.Content[0].Citations) == 0 || msg.Usage.ServerToolUse.WebSearchRequests != 1 || !strings.Contains(text, "[1]") {
		t.Errorf("Messages answer on %s, web_search not declared: %s", demo.ModelGemini, msg.RawJSON())
	}
	msg, err = ac.Messages.New(ctx(t), anthropic.MessageNewParams{Model: demo.ModelGemini, MaxTokens: 500,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Search the web for the latest news about NATS JetStream"))},
		Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}})
	if err != nil {
		t.Fatal(err)
	}
	kinds = map[string]int{}
	for _, b := range msg.Content {
		kinds[b.Type]++
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || kinds["server_tool_use"] != 1 || kinds["web_search_tool_result"] != 1 {
		t.Errorf("Messages answer on %s, web_search declared: %s", demo.ModelGemini, msg.RawJSON())
	}
	for _, declared := range []bool{false, true} {
		params := responses.ResponseNewParams{Model: demo.ModelClaude,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Search the web for the latest news about NATS JetStream")}}
		if declared {
			params.Tools = []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}
		}
		resp, err := oc.Responses.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != responses.ResponseStatusCompleted || (resp.Output[0].Type == "web_search_call") != declared ||
			len(resp.Output[len(resp.Output)-1].Content[0].Annotations) == 0 || !strings.Contains(resp.OutputText(), "[1]") {
			t.Errorf("Responses answer on %s, web_search declared %v: %s", demo.ModelClaude, declared, resp.RawJSON())
		}
	}
}

// A model with native search (sim-claude-native) searches with Anthropic's own tool:
// the answer's citations become the fleet's [n] markers and sources, and the job
// record counts its searches like the fleet's: a trace entry each, $10 per 1,000.
func TestNativeSearchInJobRecord(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{
		"model": demo.ModelClaudeNative, "messages": []any{map[string]any{"role": "user", "content": "Search the web for the latest news about NATS JetStream"}},
	})
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil || status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	content := fleettest.Content(resp)
	msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	anns, _ := msg["annotations"].([]any)
	// The simulated search is about the question: the answer quotes its pages.
	if !strings.Contains(content, "latest news about NATS JetStream, simulated result 1 of 5.[1]") || !strings.Contains(content, "[2]") || len(anns) < 2 || msg["searchfleet_native"] != nil {
		t.Fatalf("answer %q, message %v", content, msg)
	}
	if u := anns[0].(map[string]any)["url_citation"].(map[string]any)["url"]; u != "https://news.example.com/search-the-web-for-the-latest-news-about-nats-jetstream" {
		t.Errorf("first citation %v", u)
	}
	sources := resp["searchfleet"].(map[string]any)["sources"].([]any)
	if title, _ := sources[0].(map[string]any)["title"].(string); len(sources) != 3 || !strings.Contains(title, "Search the web for the latest news about NATS JetStream") {
		t.Errorf("sources %v", sources)
	}
	if n := f.Sim.Stats().Requests["model_native_search"]; n != 1 {
		t.Errorf("%d native-search model calls, want 1", n)
	}
	j, err := f.Store.Jobs.GetJob(context.Background(), jobID(t, resp))
	if err != nil {
		t.Fatal(err)
	}
	var usage map[string]any
	json.Unmarshal(j.Usage, &usage)
	if usage["searches"] != 1.0 || usage["search_cost_usd"] != 0.01 || usage["model_calls"] != 1.0 || usage["model_protocol"] != "anthropic-messages" {
		t.Errorf("usage %s", j.Usage)
	}
	var trace []map[string]any
	json.Unmarshal(j.Trace, &trace)
	if len(trace) != 1 || trace[0]["engine"] != "native:anthropic.messages" || trace[0]["query"] != "Search the web for the latest news about NATS JetStream" || len(trace[0]["sources"].([]any)) != 5 {
		t.Errorf("trace %s", j.Trace)
	}
}

// The protocol matrix of the README: every model `make run` lists (each model
// protocol, with the fleet's search and with the provider's own) answers each client
// protocol with a cited answer in that protocol's shapes — Chat url_citation
// annotations, a Responses web_search_call item and url_citation annotations, an
// Anthropic web_search_tool_result block and cited text (the last two for a request
// that declared web_search).
func TestProtocolMatrix(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	_, b, _ := f.Do(t, "GET", "/v1/models", nil)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	json.Unmarshal(b, &list)
	if len(list.Data) < 9 {
		t.Fatalf("GET /v1/models lists %s", b)
	}
	const q = "Search the web for the latest news about NATS JetStream"
	ac, oc := anthropicClient(f), openaiClient(f)
	for _, m := range list.Data {
		model := m.ID
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{
				"model": model, "messages": []any{map[string]any{"role": "user", "content": q}}})
			var chat map[string]any
			if err := json.Unmarshal(body, &chat); err != nil || status != 200 {
				t.Fatalf("chat: status %d: %s", status, body)
			}
			msg := chat["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			if anns, _ := msg["annotations"].([]any); len(anns) == 0 || !strings.Contains(fleettest.Content(chat), "[1]") {
				t.Errorf("chat: not cited: %s", body)
			}

			resp, err := oc.Responses.New(ctx(t), responses.ResponseNewParams{Model: model,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)},
				Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}})
			if err != nil {
				t.Fatalf("responses: %v", err)
			}
			searched, cited := false, 0
			for _, item := range resp.Output {
				searched = searched || item.Type == "web_search_call"
				for _, c := range item.Content {
					for _, a := range c.Annotations {
						if a.Type == "url_citation" && a.URL != "" {
							cited++
						}
					}
				}
			}
			if !searched || cited == 0 || !strings.Contains(resp.OutputText(), "[1]") {
				t.Errorf("responses: not a cited answer: %s", resp.RawJSON())
			}

			am, err := ac.Messages.New(ctx(t), anthropic.MessageNewParams{Model: model, MaxTokens: 500,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))},
				Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}})
			if err != nil {
				t.Fatalf("messages: %v", err)
			}
			results, citations := 0, 0
			for _, blk := range am.Content {
				if blk.Type == "web_search_tool_result" {
					results++
				}
				citations += len(blk.Citations)
			}
			if results == 0 || citations == 0 {
				t.Errorf("messages: not a cited answer: %s", am.RawJSON())
			}
		})
	}
}
