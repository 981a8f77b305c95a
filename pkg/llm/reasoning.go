package llm

import (
	"bytes"
	"encoding/json"
)

// ReasoningKey is the fleet's field, in a stored Chat request and its assistant
// messages, that carries what Chat has no field for: at the top level the request's
// reasoning settings (wire.ReasoningConfig), in an assistant message the reasoning
// state of the model that wrote it (thinking blocks with their signatures, reasoning
// items, thought signatures: wire.Reasoning entries). The model callers of other
// protocols read it; a Chat model never sees it (chatModelBody).
const ReasoningKey = "searchfleet_reasoning"

// chatModelBody is a chain request as a Chat model takes it: without ReasoningKey
// (its reasoning settings become reasoning_effort, unless the request names one; the
// reasoning state of other protocols is dropped, reasoning_content stays).
func chatModelBody(body []byte) ([]byte, error) {
	if !bytes.Contains(body, []byte(ReasoningKey)) {
		return body, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	if raw, ok := top[ReasoningKey]; ok {
		delete(top, ReasoningKey)
		var c struct {
			Effort string `json:"effort"`
		}
		if _, named := top["reasoning_effort"]; !named && json.Unmarshal(raw, &c) == nil && c.Effort != "" {
			top["reasoning_effort"], _ = json.Marshal(c.Effort)
		}
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(top["messages"], &msgs) == nil {
		for _, m := range msgs {
			delete(m, ReasoningKey)
		}
		top["messages"], _ = json.Marshal(msgs)
	}
	return json.Marshal(top)
}
