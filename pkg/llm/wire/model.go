package wire

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// ModelAPI is a main-model protocol as the fleet speaks it over HTTP: its codec, where
// a call goes and how it authenticates, how its stream and its error bodies read.
// OpenAI Chat is not one: llm.Client speaks it directly.
type ModelAPI interface {
	ModelCodec
	// Path returns the path of a call to model, appended to the provider's base URL.
	Path(model string, stream bool) string
	// Authorize sets the headers that carry key (and the protocol's version headers).
	Authorize(h http.Header, key string)
	// NewStreamDecoder returns a decoder of one streamed answer: the answer to a
	// request encoded with Stream set.
	NewStreamDecoder() StreamDecoder
	// DecodeError reads a failed call's body (status is the HTTP status) as an
	// *llm.Error; its Provider is left for the caller to set.
	DecodeError(status int, body []byte) *llm.Error
}

// StreamDecoder assembles one streamed answer from its server-sent events.
type StreamDecoder interface {
	// Event reads one event; text is the answer text it adds ("" when none). An error
	// reported in the stream comes back as an *llm.Error.
	Event(name string, data []byte) (text string, err error)
	// Response returns the answer the events made, or an error when the stream ended
	// before the answer did.
	Response() (*Response, error)
}

// Names of the "protocol" setting of a provider.
const (
	ModelOpenAIChat        = "openai-chat"
	ModelOpenAIResponses   = "openai-responses"
	ModelAnthropicMessages = "anthropic-messages"
	ModelGemini            = "gemini"
)

// ModelProtocols are the values a provider's "protocol" setting takes.
var ModelProtocols = []string{ModelOpenAIChat, ModelOpenAIResponses, ModelAnthropicMessages, ModelGemini}

// ModelAPIFor returns the main-model protocol named by a provider's "protocol"
// setting; false for openai-chat (llm.Client) and unknown names.
func ModelAPIFor(name string) (ModelAPI, bool) {
	switch name {
	case ModelOpenAIResponses:
		return ResponsesModel, true
	case ModelAnthropicMessages:
		return AnthropicModel, true
	case ModelGemini:
		return GeminiModel, true
	}
	return nil, false
}

// chatFinish is the Chat finish_reason of a stop reason.
var chatFinish = map[StopReason]string{StopEndTurn: "stop", StopToolUse: "tool_calls", StopMaxTokens: "length", StopRefusal: "content_filter"}

// ChatAnswer renders a model's answer as the chain's Chat assistant message (text
// content, tool_calls with the model's ids, so the next hop's tool results match), its
// finish_reason and usage.
func ChatAnswer(r *Response) (msg json.RawMessage, finish string, usage llm.Usage) {
	var text string
	var calls []llm.ToolCall
	for _, p := range r.Content {
		switch p.Kind {
		case PartText:
			text += p.Text
		case PartToolCall:
			tc := llm.ToolCall{ID: p.Call.ID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = p.Call.Name, p.Call.Arguments
			calls = append(calls, tc)
		}
	}
	m := map[string]any{"role": "assistant", "content": text}
	if len(calls) > 0 {
		m["tool_calls"] = calls
		if text == "" {
			m["content"] = nil
		}
	}
	msg, _ = json.Marshal(m)
	finish = chatFinish[r.Stop]
	if len(calls) > 0 {
		finish = "tool_calls"
	} else if finish == "" || finish == "tool_calls" {
		finish = "stop"
	}
	usage = llm.Usage{PromptTokens: r.Usage.InputTokens, CompletionTokens: r.Usage.OutputTokens, TotalTokens: r.Usage.InputTokens + r.Usage.OutputTokens}
	return msg, finish, usage
}

// toolArgs returns a tool call's arguments as a JSON object for protocols that carry
// them as one (Anthropic input, Gemini args); arguments that are not an object are
// wrapped as {"arguments": "…"} so the model still sees what it wrote.
func toolArgs(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) == nil && obj != nil {
		return json.RawMessage(args)
	}
	if args == "" {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(map[string]string{"arguments": args})
	return b
}

// compactArgs renders a protocol's argument object as Chat's arguments string.
func compactArgs(raw json.RawMessage) string {
	if isNull(raw) {
		return "{}"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// resultText is a tool result's text (images are not forwarded to a tool result).
func resultText(res *ToolResult) string {
	var s string
	for _, p := range res.Parts {
		if p.Kind == PartText {
			if s != "" {
				s += "\n"
			}
			s += p.Text
		}
	}
	return s
}

// statusError is an *llm.Error for an error a provider reported inside a 200 answer
// or a stream.
func statusError(status int, typ, msg string) *llm.Error {
	return &llm.Error{Status: status, Type: typ, Message: clip(msg, 500)}
}

// parseDelay reads a protobuf Duration string ("34.4s").
func parseDelay(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0
	}
	return d
}
