package trace

import (
	"cmp"
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// The OpenTelemetry GenAI semantic conventions' attributes the model spans carry
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/).
const (
	GenAIOperation      = attribute.Key("gen_ai.operation.name")
	GenAIProvider       = attribute.Key("gen_ai.provider.name")
	GenAIRequestModel   = attribute.Key("gen_ai.request.model")
	GenAIResponseModel  = attribute.Key("gen_ai.response.model")
	GenAIInputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	GenAIOutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	GenAIFinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	GenAIInputMessages  = attribute.Key("gen_ai.input.messages")
	GenAIOutputMessages = attribute.Key("gen_ai.output.messages")
	GenAIToolName       = attribute.Key("gen_ai.tool.name")
	GenAIToolCallID     = attribute.Key("gen_ai.tool.call.id")
)

// The fleet's own attributes.
const (
	JobID         = attribute.Key("searchfleet.job.id")
	Hop           = attribute.Key("searchfleet.hop")
	FleetProvider = attribute.Key("searchfleet.provider")
	SearchEngine  = attribute.Key("searchfleet.search.engine")
	SearchQuery   = attribute.Key("searchfleet.search.query")
	SearchResults = attribute.Key("searchfleet.search.results")
	SearchCost    = attribute.Key("searchfleet.search.cost_usd")
	// SearchOutcome is how a search was answered: "paid", "cached", "shared" (by an
	// identical search in flight), or why it was not ("error_<kind>", ...).
	SearchOutcome = attribute.Key("searchfleet.search.outcome")
	Attempt       = attribute.Key("searchfleet.attempt")
	// Action is what became of a consumed message: ack, nak, in_progress, term_dlq.
	Action = attribute.Key("searchfleet.message.action")
)

// providerNames maps the main models' protocols (wire.Model*) to
// gen_ai.provider.name's well-known values; any other protocol is named as it is.
var providerNames = map[string]string{
	"openai-chat": "openai", "openai-responses": "openai", "anthropic-messages": "anthropic", "gemini": "gcp.gemini",
}

// Model starts a model call's client span ("chat <model>"): operation chat, the
// provider (protocol is the provider's protocol, provider the fleet's name for
// it), the requested model. Off, it costs nothing.
func Model(ctx context.Context, protocol, provider, model string) (context.Context, oteltrace.Span) {
	if !on.Load() {
		return ctx, noopSpan
	}
	return Start(ctx, "chat "+model, oteltrace.SpanKindClient,
		GenAIOperation.String("chat"), GenAIProvider.String(cmp.Or(providerNames[protocol], protocol)), GenAIRequestModel.String(model), FleetProvider.String(provider))
}

// Answered puts a model's answer on its span: the model that answered, the tokens,
// why it stopped.
func Answered(span oteltrace.Span, model string, in, out int, finish string) {
	if !span.IsRecording() {
		return
	}
	if model != "" {
		span.SetAttributes(GenAIResponseModel.String(model))
	}
	span.SetAttributes(GenAIInputTokens.Int(in), GenAIOutputTokens.Int(out))
	if finish != "" {
		span.SetAttributes(GenAIFinishReasons.StringSlice([]string{finish}))
	}
}

// message is one message of gen_ai.input.messages / gen_ai.output.messages.
type message struct {
	Role   string `json:"role"`
	Parts  []part `json:"parts"`
	Finish string `json:"finish_reason,omitempty"`
}

type part struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// Messages puts a model call's latest user text and its answer's text on its span,
// only when the operator opted in (Content).
func Messages(span oteltrace.Span, input, output, finish string) {
	if !content.Load() || !span.IsRecording() {
		return
	}
	in, _ := json.Marshal([]message{{Role: "user", Parts: []part{{Type: "text", Content: input}}}})
	out, _ := json.Marshal([]message{{Role: "assistant", Parts: []part{{Type: "text", Content: output}}, Finish: finish}})
	span.SetAttributes(GenAIInputMessages.String(string(in)), GenAIOutputMessages.String(string(out)))
}
