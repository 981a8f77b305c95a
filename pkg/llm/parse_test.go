package llm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// chatBody is a client's request as the ingress reads it: a system prompt, a few
// turns with a tool call and its result, two function tools and sampling settings.
func chatBody() []byte {
	var msgs []string
	msgs = append(msgs, `{"role":"system","content":"You are helpful."}`)
	for i := range 3 {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"user","content":"Question %d: what changed in NATS JetStream this year?"}`, i),
			fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"nats\"}"}}]}`, i),
			fmt.Sprintf(`{"role":"tool","tool_call_id":"call_%d","content":%q}`, i, strings.Repeat("a result line. ", 20)))
	}
	tool := `{"type":"function","function":{"name":"%s","description":"Look things up.","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}`
	return fmt.Appendf(nil, `{"model":"gpt-x","messages":[%s],"tools":[%s,%s],"temperature":0.2,"max_tokens":512,"stream":false,"tool_choice":"auto"}`,
		strings.Join(msgs, ","), fmt.Sprintf(tool, "lookup"), fmt.Sprintf(tool, "fetch"))
}

// BenchmarkParseChatRequest is the ingress's read of a client's Chat request.
func BenchmarkParseChatRequest(b *testing.B) {
	body := chatBody()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseChatRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseChatRequestErrorsAsEncodingJSON holds the ingress's read of a request to
// encoding/json's words: a body that is not a JSON object is refused with encoding/json's
// error, shortened, and a field of the wrong type with the field's own message.
func TestParseChatRequestErrorsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"model":"m","messages":[}`:                   "", // from encoding/json below
		`{"model":"m","messages":[{"role":"user"}`:     "",
		`{"model":"m","messages":[{"role":"user"}]} x`: "",
		`[1]`:                                   "",
		`{"model":7,"messages":[]}`:             "'model' must be a non-empty string",
		`{"model":"m","messages":{}}`:           "'messages' must be an array of message objects",
		`{"model":"m","messages":[{"role":1}]}`: "messages[0] is not a valid message object",
		`{"model":"m","messages":[{"role":"user"}],"stream":"yes"}`: "'stream' must be a boolean",
		`{"model":"m","messages":[{"role":"user"}],"tools":[7]}`:    "tools[0] is not a valid tool object",
	} {
		if want == "" {
			var top map[string]json.RawMessage
			err := json.Unmarshal([]byte(body), &top)
			if err == nil {
				t.Fatalf("%s: encoding/json reads it", body)
			}
			want = "request body is not valid JSON: " + redact.JSONError(err)
		}
		_, err := ParseChatRequest([]byte(body))
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}
