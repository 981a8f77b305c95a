package intent

import (
	"encoding/json"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// LatestUserText returns the text of the latest message with role "user" in an
// OpenAI chat messages array (each element one raw JSON message object): string
// content as is, or the text of the "text" and "input_text" parts of array content
// joined with newlines. Images, audio, files and any other parts are ignored, so an
// image-only message yields "". It returns "" when there is no user message.
//
// The classifier looks at this message only (seed 000): earlier turns already had
// their chance, and the sticky flag carries an intent through the tool-calling hops
// of one chain. A message that is not a JSON object is skipped, not an error: intent
// detection must never fail a request. The same shapes cover Responses API input items
// and Anthropic messages; as Anthropic sends tool results as user messages made of
// "tool_result" blocks, a user message with nothing but such blocks is not a user
// turn and is skipped too.
func LatestUserText(messages []json.RawMessage) string {
	for i := len(messages) - 1; i >= 0; i-- {
		// Decode the role alone first: the messages after the latest user turn are
		// often large tool results, and their content is not needed.
		var head struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(messages[i], &head) != nil || head.Role != "user" {
			continue
		}
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(messages[i], &m) != nil {
			return ""
		}
		text, toolResults := llm.ContentText(m.Content)
		if toolResults {
			continue
		}
		return text
	}
	return ""
}
