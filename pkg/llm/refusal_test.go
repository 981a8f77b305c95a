package llm_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// A provider's refusal is the client's only when it is about what the client sent;
// then its meaning is kept, in the client's protocol's field names.
func TestClientRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		err      llm.Error
		protocol string
		client   bool
		param    string
		message  string
	}{
		{"the fleet's conversation structure", llm.Error{Status: 400, Message: "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`."}, "openai.chat", false, "", ""},
		{"the fleet's tool ids", llm.Error{Status: 400, Message: "unexpected `tool_use_id` found in `tool_result` blocks: toolu_1"}, "anthropic.messages", false, "", ""},
		{"the fleet's credentials", llm.Error{Status: 401, Message: "invalid x-api-key"}, "", false, "", ""},
		{"the fleet's model name", llm.Error{Status: 404, Message: "model: claude-x"}, "", false, "", ""},
		{"rate limited", llm.Error{Status: 429, Message: "slow down"}, "", false, "", ""},
		{"a provider failure", llm.Error{Status: 500, Message: "overloaded"}, "", false, "", ""},
		{"context too long", llm.Error{Status: 400, Code: "context_length_exceeded", Message: "This model's maximum context length is 128000 tokens."}, "openai.responses", true, "", "This model's maximum context length is 128000 tokens."},
		{"prompt too long", llm.Error{Status: 400, Message: "prompt is too long: 210000 tokens > 200000 maximum"}, "anthropic.messages", true, "", "prompt is too long: 210000 tokens > 200000 maximum"},
		{"content policy", llm.Error{Status: 400, Code: "content_policy_violation", Message: "Your request was rejected by the safety system."}, "", true, "", "Your request was rejected by the safety system."},
		{"too large", llm.Error{Status: 413, Message: "request too large"}, "", true, "", "request too large"},
		{"max_tokens, to a Responses client", llm.Error{Status: 400, Message: "max_tokens: 100000 > 64000, which is the maximum allowed for this model"}, "openai.responses", true, "max_output_tokens", "max_output_tokens: 100000 > 64000, which is the maximum allowed for this model"},
		{"maxOutputTokens, to a Messages client", llm.Error{Status: 400, Message: "Invalid value for 'maxOutputTokens': must be at most 8192."}, "anthropic.messages", true, "max_tokens", "Invalid value for 'max_tokens': must be at most 8192."},
		{"temperature", llm.Error{Status: 400, Message: "temperature: range: 0..1"}, "anthropic.messages", true, "temperature", "temperature: range: 0..1"},
	} {
		r, ok := llm.ClientRefused(&c.err, c.protocol)
		if ok != c.client {
			t.Errorf("%s: client's = %v, want %v", c.name, ok, c.client)
			continue
		}
		if ok && (r.Param != c.param || r.Message != c.message || r.Status != c.err.Status) {
			t.Errorf("%s: %+v, want param %q message %q", c.name, r, c.param, c.message)
		}
	}
}
