package simulator

import (
	"encoding/json"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// jsonField returns a queryOf that reads a top-level string field of a JSON body.
func jsonField(name string) func(*http.Request, []byte) string {
	return func(_ *http.Request, body []byte) string { return jstr(decodeBody(body)[name]) }
}

// urlParam returns a queryOf that reads a URL query parameter.
func urlParam(name string) func(*http.Request, []byte) string {
	return func(r *http.Request, _ []byte) string { return r.URL.Query().Get(name) }
}

// roleContent is a message as a request body carries it (Chat and Anthropic messages,
// Responses input items): its role and its content.
type roleContent struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// bodyMessages are the messages of a Chat or Messages request body; nil when it does
// not decode.
func bodyMessages(body []byte) []roleContent {
	var req struct {
		Messages []roleContent `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	return req.Messages
}

// lastUser is the text of the last user message of msgs (string content or text
// parts).
func lastUser(msgs []roleContent) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return llm.Text(msgs[i].Content)
		}
	}
	return ""
}

// chatQuery is a queryOf that reads the text of the last user message of an
// OpenAI-style chat request body.
func chatQuery(_ *http.Request, body []byte) string { return lastUser(bodyMessages(body)) }
