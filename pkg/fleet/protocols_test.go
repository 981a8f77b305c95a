package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// searchPrompt is the question the protocol tests ask; searchQuote is what an answer
// quotes from the simulator's first page, whose search results are made from the query.
const (
	searchPrompt = "Search the web: who won the 2022 world cup?"
	searchQuote  = "who won the 2022 world cup, simulated result 1 of "
)

func openaiClient(f *fleettest.Fleet) openai.Client {
	return openai.NewClient(option.WithBaseURL(f.URL+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

func anthropicClient(f *fleettest.Fleet) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(f.URL), aoption.WithAPIKey("test"), aoption.WithMaxRetries(0))
}

// onDomain reports whether raw's host is domain or one of its subdomains.
func onDomain(raw, domain string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Hostname() == domain || strings.HasSuffix(u.Hostname(), "."+domain))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	t.Cleanup(cancel)
	return c
}

// POST /v1/responses with the web_search tool, through the official SDK: a
// web_search_call item per search, then the message with url_citation annotations
// whose character offsets point at the [n] markers; GET /v1/responses/{id} returns it.
func TestResponsesWebSearch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := openaiClient(f)
	resp, err := c.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:        demo.Model,
		Instructions: openai.String("Answer briefly."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(searchPrompt)},
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{
			Type:              responses.WebSearchToolTypeWebSearch,
			Filters:           responses.WebSearchToolFiltersParam{AllowedDomains: []string{"example.org"}},
			UserLocation:      responses.WebSearchToolUserLocationParam{City: openai.String("San Francisco"), Country: openai.String("US")},
			SearchContextSize: responses.WebSearchToolSearchContextSizeHigh,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusCompleted || !strings.HasPrefix(resp.ID, "resp_") {
		t.Fatalf("status %q id %q", resp.Status, resp.ID)
	}
	if len(resp.Output) < 2 || resp.Output[0].Type != "web_search_call" {
		t.Fatalf("output %s", resp.RawJSON())
	}
	ws := resp.Output[0].AsWebSearchCall()
	if ws.Status != "completed" || ws.Action.Type != "search" || ws.Action.Query == "" || len(ws.Action.Sources) == 0 {
		t.Fatalf("web_search_call %+v", ws)
	}
	msg := resp.Output[len(resp.Output)-1].AsMessage()
	if msg.Type != "message" || len(msg.Content) != 1 {
		t.Fatalf("message item %s", resp.Output[len(resp.Output)-1].RawJSON())
	}
	text := resp.OutputText()
	anns := msg.Content[0].Annotations
	if !strings.Contains(text, "[1]") || len(anns) == 0 || !strings.Contains(text, "who won the 2022 world cup, simulated result") {
		t.Fatalf("text %q annotations %d", text, len(anns))
	}
	runes := []rune(text)
	for _, a := range anns {
		// Every cited page is on the allowed domain and about the question.
		if a.Type != "url_citation" || !strings.HasPrefix(a.URL, "https://") || !strings.HasPrefix(string(runes[a.StartIndex:a.EndIndex]), "[") ||
			!onDomain(a.URL, "example.org") || !strings.Contains(a.URL, "/search-the-web-who-won-the-2022-world-cup") {
			t.Errorf("annotation %+v spans %q", a, string(runes[a.StartIndex:a.EndIndex]))
		}
	}
	if resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v", resp.Usage)
	}
	// The city cannot be honoured: the answer says so.
	if !strings.Contains(resp.RawJSON(), "user_location.city") {
		t.Errorf("no warning about user_location.city: %s", resp.RawJSON())
	}
	got, err := c.Responses.Get(ctx(t), resp.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputText() != text || len(got.Output) != len(resp.Output) {
		t.Fatalf("GET returned %s", got.RawJSON())
	}
	// A chat job is not a response.
	status, _ := f.Chat(t, "hello sim:nosearch")
	if status != 200 {
		t.Fatal(status)
	}
	if _, err := c.Responses.Get(ctx(t), "resp_doesnotexist", responses.ResponseGetParams{}); err == nil {
		t.Fatal("GET of an unknown response succeeded")
	}
}

// A client function tool is returned as a function_call item, untouched; its output
// goes back as function_call_output and the model answers.
func TestResponsesClientTool(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := openaiClient(f)
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	resp, err := c.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: demo.Model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris sim:tool=get_weather sim:nosearch")},
		Tools: []responses.ToolUnionParam{tool},
	})
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseFunctionToolCall
	for _, it := range resp.Output {
		if it.Type == "function_call" {
			call = it.AsFunctionCall()
		}
	}
	if call.Name != "get_weather" || call.CallID == "" {
		t.Fatalf("no function_call: %s", resp.RawJSON())
	}
	next, err := c.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: demo.Model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Weather in Paris sim:tool=get_weather sim:nosearch", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"temp_c": 18}`)}}},
		}},
		Tools: []responses.ToolUnionParam{tool},
	})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status != "completed" || next.OutputText() == "" {
		t.Fatalf("after the tool result: %s", next.RawJSON())
	}
}

// stream: true renders the finished answer as the Responses event sequence; the
// SDK's stream reader reads it to response.completed.
func TestResponsesStream(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := openaiClient(f)
	st := c.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{
		Model: demo.Model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(searchPrompt)},
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}},
	})
	var types []string
	var text strings.Builder
	var final responses.Response
	seq := int64(-1)
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq+1 {
			t.Errorf("event %s has sequence_number %d after %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"response.created", "response.in_progress", "response.output_item.added", "response.web_search_call.searching",
		"response.web_search_call.completed", "response.content_part.added", "response.output_text.delta", "response.output_text.annotation.added",
		"response.output_text.done", "response.output_item.done", "response.completed"} {
		if !slices.Contains(types, want) {
			t.Errorf("no %s event in %v", want, types)
		}
	}
	if final.OutputText() != text.String() || !strings.Contains(text.String(), "[1]") {
		t.Fatalf("deltas %q, final %q", text.String(), final.OutputText())
	}
}

// POST /v1/messages with the web_search server tool, through the official SDK:
// server_tool_use, web_search_tool_result, text blocks with web_search_result_location
// citations, usage.server_tool_use.web_search_requests, stop_reason end_turn.
func TestMessagesWebSearch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := anthropicClient(f)
	msg, err := c.Messages.New(ctx(t), anthropic.MessageNewParams{
		Model:     anthropic.Model(demo.Model),
		MaxTokens: 1024,
		System:    []anthropic.TextBlockParam{{Text: "Answer briefly."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(searchPrompt))},
		Tools: []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{
			MaxUses: anthropic.Int(3), BlockedDomains: []string{"example.com"},
			UserLocation: anthropic.UserLocationParam{Country: anthropic.String("US"), Timezone: anthropic.String("America/Los_Angeles")},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || !strings.HasPrefix(msg.ID, "msg_") {
		t.Fatalf("stop %q id %q", msg.StopReason, msg.ID)
	}
	var kinds []string
	var text strings.Builder
	cited := 0
	for _, b := range msg.Content {
		kinds = append(kinds, b.Type)
		switch b.Type {
		case "server_tool_use":
			u := b.AsServerToolUse()
			if !strings.HasPrefix(u.ID, "srvtoolu_") || u.Name != "web_search" || !strings.Contains(string(b.Input), "query") {
				t.Errorf("server_tool_use %s", b.RawJSON())
			}
		case "web_search_tool_result":
			r := b.AsWebSearchToolResult()
			if len(r.Content.OfWebSearchResultBlockArray) == 0 || r.Content.OfWebSearchResultBlockArray[0].URL == "" {
				t.Errorf("web_search_tool_result %s", b.RawJSON())
			}
		case "text":
			text.WriteString(b.Text)
			for _, c := range b.Citations {
				if c.Type != "web_search_result_location" || c.URL == "" || c.EncryptedIndex == "" {
					t.Errorf("citation %s", c.RawJSON())
				}
				cited++
			}
		}
	}
	if len(kinds) < 3 || kinds[0] != "server_tool_use" || kinds[1] != "web_search_tool_result" || cited == 0 || !strings.Contains(text.String(), "[1]") {
		t.Fatalf("content %v, %d citations: %s", kinds, cited, msg.RawJSON())
	}
	if msg.Usage.ServerToolUse.WebSearchRequests < 1 || msg.Usage.OutputTokens == 0 {
		t.Errorf("usage %s", msg.Usage.RawJSON())
	}
	if !strings.Contains(msg.RawJSON(), "timezone") {
		t.Errorf("no warning about user_location.timezone: %s", msg.RawJSON())
	}
}

// A client tool comes back as a tool_use block (stop_reason tool_use) and its
// tool_result continues the conversation; the stream renders the answer as the
// Messages event sequence that the SDK's accumulator folds into the same message.
func TestMessagesClientToolAndStream(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := anthropicClient(f)
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}
	user := anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris sim:tool=get_weather sim:nosearch"))
	msg, err := c.Messages.New(ctx(t), anthropic.MessageNewParams{Model: anthropic.Model(demo.Model), MaxTokens: 512,
		Messages: []anthropic.MessageParam{user}, Tools: []anthropic.ToolUnionParam{tool}})
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("stop_reason %q: %s", msg.StopReason, msg.RawJSON())
	}
	var use anthropic.ToolUseBlock
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			use = b.AsToolUse()
		}
	}
	if use.Name != "get_weather" || use.ID == "" {
		t.Fatalf("no tool_use: %s", msg.RawJSON())
	}
	next, err := c.Messages.New(ctx(t), anthropic.MessageNewParams{Model: anthropic.Model(demo.Model), MaxTokens: 512, Tools: []anthropic.ToolUnionParam{tool},
		Messages: []anthropic.MessageParam{user, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"temp_c": 18}`, false))}})
	if err != nil {
		t.Fatal(err)
	}
	if next.StopReason != anthropic.StopReasonEndTurn || len(next.Content) == 0 {
		t.Fatalf("after the tool result: %s", next.RawJSON())
	}

	st := c.Messages.NewStreaming(ctx(t), anthropic.MessageNewParams{Model: anthropic.Model(demo.Model), MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(searchPrompt))},
		Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20260209: &anthropic.WebSearchTool20260209Param{}}}})
	var acc anthropic.Message
	var types []string
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
		if !slices.Contains(types, want) {
			t.Errorf("no %s in %v", want, types)
		}
	}
	var kinds []string
	cited := 0
	for _, b := range acc.Content {
		kinds = append(kinds, b.Type)
		cited += len(b.Citations)
	}
	if len(kinds) < 3 || kinds[0] != "server_tool_use" || kinds[1] != "web_search_tool_result" || cited == 0 || acc.StopReason != "end_turn" {
		t.Fatalf("accumulated %v (%d citations, stop %q)", kinds, cited, acc.StopReason)
	}
	if acc.Usage.ServerToolUse.WebSearchRequests < 1 {
		t.Errorf("usage %+v", acc.Usage)
	}
}

// Bad input gets each protocol's own error shape and status.
func TestProtocolErrors(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.MaxBodyBytes = 64 << 10 }))
	big := `{"model":"` + demo.Model + `","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`
	for _, tc := range []struct {
		path, body string
		status     int
		errType    string
	}{
		{"/v1/messages", `{not json`, 400, "invalid_request_error"},
		{"/v1/messages", `{"model":"` + demo.Model + `","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error"},
		{"/v1/messages", `{"model":"` + demo.Model + `","max_tokens":"ten","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error"},
		{"/v1/messages", `{"model":"` + demo.Model + `","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"computer_20250124","name":"computer"}]}`, 400, "invalid_request_error"},
		{"/v1/messages", `{"model":"` + demo.Model + `","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search","allowed_domains":["a.com"],"blocked_domains":["b.com"]}]}`, 400, "invalid_request_error"},
		{"/v1/messages", `{"model":"nope","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 404, "not_found_error"},
		{"/v1/messages", big, 413, "request_too_large"},
		{"/v1/responses", `{not json`, 400, "invalid_request_error"},
		{"/v1/responses", `{"model":"` + demo.Model + `"}`, 400, "invalid_request_error"},
		{"/v1/responses", `{"model":"` + demo.Model + `","input":42}`, 400, "invalid_request_error"},
		{"/v1/responses", `{"model":"` + demo.Model + `","input":"hi","tools":[{"type":"file_search"}]}`, 400, "invalid_request_error"},
		{"/v1/responses", `{"model":"` + demo.Model + `","input":"hi","tools":[{"type":"web_search","search_context_size":"huge"}]}`, 400, "invalid_request_error"},
		{"/v1/responses", big, 413, "invalid_request_error"},
	} {
		status, body, _ := f.Do(t, "POST", tc.path, tc.body)
		var anth struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(body, &anth)
		if status != tc.status || anth.Error.Type != tc.errType || anth.Error.Message == "" {
			t.Errorf("%s %.60s: %d %s", tc.path, tc.body, status, body)
		}
		if strings.HasPrefix(tc.path, "/v1/messages") != (anth.Type == "error") {
			t.Errorf("%s: error shape %s", tc.path, body)
		}
	}
	// The SDKs surface these as their own error types.
	ac, oc := anthropicClient(f), openaiClient(f)
	_, err := ac.Messages.New(ctx(t), anthropic.MessageNewParams{Model: "nope", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound {
		t.Errorf("anthropic SDK error %v", err)
	}
	_, err = oc.Responses.New(ctx(t), responses.ResponseNewParams{Model: "nope",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusNotFound {
		t.Errorf("openai SDK error %v", err)
	}
}
