package wire

import (
	"encoding/json"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// ChatAnswer renders a model's answer as a Chat assistant message (the turn's, with
// the native search report in llm.NativeKey), its finish_reason and usage.
func ChatAnswer(r *Response) (msg json.RawMessage, finish string, usage llm.Usage) {
	t := TurnOf(r)
	m, finish := t.ChatMessage()
	if t.Native != nil {
		m[llm.NativeKey] = t.Native
	}
	msg, _ = json.Marshal(m)
	return msg, finish, t.Usage
}
