package wire

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
// setting ("" is openai-chat); false for unknown names.
func ModelAPIFor(name string) (ModelAPI, bool) {
	switch name {
	case ModelOpenAIChat, "":
		return ChatModel, true
	case ModelOpenAIResponses:
		return ResponsesModel, true
	case ModelAnthropicMessages:
		return AnthropicModel, true
	case ModelGemini:
		return GeminiModel, true
	}
	return nil, false
}

// ChatModelFor returns the Chat model protocol of a provider kind: Kimi's or GLM's,
// whose own search the fleet can forward, else ChatModel.
func ChatModelFor(providerKind string) ModelAPI {
	switch providerKind {
	case "kimi", "moonshot":
		return KimiModel
	case "glm", "zhipu":
		return GLMModel
	}
	return ChatModel
}
