package llm

// ReasoningKey is the fleet's field, in a stored Chat request and its assistant
// messages, that carries what Chat has no field for: at the top level the request's
// reasoning settings (wire.ReasoningConfig), in an assistant message the reasoning
// state of the model that wrote it (thinking blocks with their signatures, reasoning
// items, thought signatures: wire.Reasoning entries). The model codecs read it; a
// Chat model never sees it (wire.ChatModel sends a Chat model's own
// reasoning_content only).
const ReasoningKey = "searchfleet_reasoning"
