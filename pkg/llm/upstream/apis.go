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

// modelAPIs are the main-model protocols by the name of a provider's "protocol"
// setting ("" is openai-chat).
var modelAPIs = map[string]wire.ModelAPI{"": openaichat.Model, ModelOpenAIChat: openaichat.Model, ModelOpenAIResponses: responses.Model,
	ModelAnthropicMessages: anthropic.Model, ModelGemini: gemini.Model, ModelPerplexityAgent: responses.PerplexityAgent}

// ModelAPIFor returns the main-model protocol named by a provider's "protocol"
// setting ("" is openai-chat); false for unknown names.
func ModelAPIFor(name string) (wire.ModelAPI, bool) {
	api, ok := modelAPIs[name]
	return api, ok
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
