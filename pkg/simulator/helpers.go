package simulator

import (
	"encoding/json"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// jsonField returns a queryOf that reads a top-level string field of a JSON body.
func jsonField(name string) func(*http.Request, []byte) string {
	return func(_ *http.Request, body []byte) string {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil {
			return ""
		}
		var s string
		json.Unmarshal(m[name], &s)
		return s
	}
}

// urlParam returns a queryOf that reads a URL query parameter.
func urlParam(name string) func(*http.Request, []byte) string {
	return func(r *http.Request, _ []byte) string { return r.URL.Query().Get(name) }
}

// lastUserText returns the text of the last user message of an OpenAI-style chat
// request body (string content or text parts).
func lastUserText(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return llm.Text(req.Messages[i].Content)
		}
	}
	return ""
}
