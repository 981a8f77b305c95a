package intent

import (
	"bytes"
	"encoding/json"
	"strings"
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
// and Anthropic messages.
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
		return contentText(m.Content)
	}
	return ""
}

// contentText returns the text of a message's content: a string, or an array of parts.
func contentText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	case '[':
		var parts []json.RawMessage
		if json.Unmarshal(raw, &parts) != nil {
			return ""
		}
		var b strings.Builder
		for _, p := range parts {
			// Parts are decoded one by one so one odd part (a text that is not a
			// string) does not hide the others.
			var part struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(p, &part) != nil || part.Text == "" {
				continue
			}
			if part.Type != "text" && part.Type != "input_text" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(part.Text)
		}
		return b.String()
	}
	return ""
}
