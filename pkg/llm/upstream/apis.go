package upstream

import (
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Names of the "protocol" setting of a provider.
const (
	ModelOpenAIChat        = "openai-chat"
	ModelOpenAIResponses   = "openai-responses"
	ModelAnthropicMessages = "anthropic-messages"
	ModelGemini            = "gemini"
	ModelPerplexityAgent   = "perplexity-agent"
)

// ModelProtocols are the values a provider's "protocol" setting takes.
var ModelProtocols = []string{ModelOpenAIChat, ModelOpenAIResponses, ModelAnthropicMessages, ModelGemini, ModelPerplexityAgent}

// ModelAPIFor returns the main-model protocol named by a provider's "protocol"
// setting ("" is openai-chat); false for unknown names.
func ModelAPIFor(name string) (wire.ModelAPI, bool) {
	switch name {
	case ModelOpenAIChat, "":
		return openaichat.Model, true
	case ModelOpenAIResponses:
		return responses.Model, true
	case ModelAnthropicMessages:
		return anthropic.Model, true
	case ModelGemini:
		return gemini.Model, true
	case ModelPerplexityAgent:
		return responses.PerplexityAgent, true
	}
	return nil, false
}

// ChatModelFor returns the Chat model protocol of a provider kind: Kimi's or GLM's,
// whose own search the fleet can forward, else ChatModel.
func ChatModelFor(providerKind string) wire.ModelAPI {
	switch providerKind {
	case "kimi", "moonshot":
		return openaichat.Kimi
	case "glm", "zhipu":
		return openaichat.GLM
	}
	return openaichat.Model
}
