package simulator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/pkg/simulator"
)

func startSim(t *testing.T) string {
	t.Helper()
	hs, url, err := simulator.New(simulator.Options{}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	return url
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The scripted model's Messages endpoint is what the official Anthropic SDK expects:
// offered web_search it answers a tool_use block (stop_reason tool_use); given the
// results it answers citing them; streamed, the SDK's accumulator builds the same
// answer from the events.
func TestSimAnthropicMessagesWithSDK(t *testing.T) {
	t.Parallel()
	c := anthropic.NewClient(aoption.WithBaseURL(startSim(t)), aoption.WithAPIKey("sim-key"), aoption.WithMaxRetries(0))
	tool := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "web_search", Description: anthropic.String("Search the web"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"query": map[string]any{"type": "string"}}, Required: []string{"query"}}}}
	q := anthropic.NewUserMessage(anthropic.NewTextBlock("Search the web for the latest news about NATS JetStream"))
	msg, err := c.Messages.New(timeout(t), anthropic.MessageNewParams{Model: "sim-scripted", MaxTokens: 500, Messages: []anthropic.MessageParam{q}, Tools: []anthropic.ToolUnionParam{tool}})
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || !strings.HasPrefix(msg.Content[0].ID, "toolu_") {
		t.Fatalf("answer %s", msg.RawJSON())
	}
	call := msg.Content[0].AsToolUse()
	results := anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, "[1] NATS JetStream 2.12 is out (https://nats.io/blog/2-12)", false))
	params := anthropic.MessageNewParams{Model: "sim-scripted", MaxTokens: 500, Messages: []anthropic.MessageParam{q, msg.ToParam(), results}, Tools: []anthropic.ToolUnionParam{tool}}
	final, err := c.Messages.New(timeout(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if final.StopReason != anthropic.StopReasonEndTurn || !strings.Contains(final.Content[0].Text, "[1]") || final.Usage.OutputTokens == 0 {
		t.Fatalf("final %s", final.RawJSON())
	}
	stream := c.Messages.NewStreaming(timeout(t), params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != final.StopReason || len(acc.Content) != 1 || acc.Content[0].Text != final.Content[0].Text {
		t.Errorf("streamed %+v, whole %q", acc.Content, final.Content[0].Text)
	}
}

// The scripted model's Responses endpoint is what the official OpenAI SDK expects: a
// function_call item for web_search, then an answer from the function_call_output.
func TestSimResponsesWithSDK(t *testing.T) {
	t.Parallel()
	c := openai.NewClient(option.WithBaseURL(startSim(t)+"/v1"), option.WithAPIKey("sim-key"), option.WithMaxRetries(0))
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "web_search", Strict: openai.Bool(false),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}, "required": []string{"query"}}}}
	question := responses.ResponseInputItemParamOfMessage("Search the web for the latest news about NATS JetStream", responses.EasyInputMessageRoleUser)
	resp, err := c.Responses.New(timeout(t), responses.ResponseNewParams{Model: "sim-scripted", Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" {
		t.Fatalf("output %s", resp.RawJSON())
	}
	fc := resp.Output[0].AsFunctionCall()
	if fc.Name != "web_search" || fc.CallID == "" || !strings.Contains(fc.Arguments, "NATS JetStream") {
		t.Fatalf("function call %+v", fc)
	}
	output := responses.ResponseInputItemParamOfFunctionCallOutput("[1] NATS JetStream 2.12 is out (https://nats.io/blog/2-12)")
	output.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	final, err := c.Responses.New(timeout(t), responses.ResponseNewParams{Model: "sim-scripted", Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question,
			responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name),
			output}}})
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != responses.ResponseStatusCompleted || !strings.Contains(final.OutputText(), "[1]") {
		t.Fatalf("final %s", final.RawJSON())
	}
}
