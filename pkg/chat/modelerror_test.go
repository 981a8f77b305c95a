package chat

import (
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// A provider's refusal of the request the fleet built reaches the client as a 502 in
// the fleet's words; one of what the client sent keeps the provider's status and
// meaning, in the client's protocol's field names.
func TestModelErrorBlames(t *testing.T) {
	t.Parallel()
	fleets := &llm.Error{Provider: "anthropic", Status: 400, Message: "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`."}
	je := modelError(fleets, fleets, "openai.chat")
	if je.Status != http.StatusBadGateway || strings.Contains(je.Message, "thinking") || strings.Contains(je.Message, "messages.1") {
		t.Errorf("the fleet's request refused: %+v", je)
	}
	clients := &llm.Error{Provider: "anthropic", Status: 400, Message: "max_tokens: 100000 > 64000, which is the maximum allowed"}
	je = modelError(clients, clients, "openai.responses")
	if je.Status != http.StatusBadRequest || !strings.HasPrefix(je.Message, "max_output_tokens: 100000 > 64000") {
		t.Errorf("the client's parameter refused: %+v", je)
	}
	creds := &llm.Error{Provider: "openai", Status: 401, Message: "Incorrect API key provided: sk-…"}
	if je = modelError(creds, creds, ""); je.Status != http.StatusBadGateway || strings.Contains(je.Message, "API key") {
		t.Errorf("the fleet's credentials refused: %+v", je)
	}
}
