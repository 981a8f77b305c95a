package ingress

import (
	"encoding/json"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// questionChars bounds the question a job summary shows.
const questionChars = 200

// questionOf is the text of a stored request's last user turn (wire.Stored; or, in a
// record stored before requests were canonical, in any of the client protocols: Chat
// and Anthropic messages, a Responses input), or a direct search's query, or "".
func questionOf(req json.RawMessage) string {
	if st, err := wire.DecodeStored(req); err == nil && st.Format == wire.StoredFormat {
		return wire.LatestUserText(st.Request.Messages)
	}
	var r struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
		Query string          `json:"query"`
	}
	if json.Unmarshal(req, &r) != nil {
		return ""
	}
	if r.Query != "" {
		return r.Query
	}
	if len(r.Input) > 0 {
		var items []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(r.Input, &items) == nil {
			for i := len(items) - 1; i >= 0; i-- {
				if items[i].Role == "user" {
					return textOf(items[i].Content)
				}
			}
		}
		return textOf(r.Input)
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return textOf(r.Messages[i].Content)
		}
	}
	return ""
}

// textOf reads message content: a string, or the text of its text parts.
func textOf(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(c, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Text != "" {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
