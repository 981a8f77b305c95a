package wire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A seal opens for its tenant with any of the sealer's secrets, and for no other
// tenant, no other fleet, and not once altered.
func TestSealOpensOnlyForItsTenant(t *testing.T) {
	old, _ := wire.NewSealer(strings.Repeat("o", 32))
	s, err := wire.NewSealer(strings.Repeat("n", 32), strings.Repeat("o", 32))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := wire.NewSealer(strings.Repeat("x", 32))
	if _, err := wire.NewSealer("short"); err == nil {
		t.Error("a short secret was taken")
	}
	rs := &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: "thinking", Signature: "sig"}
	sealed := s.Seal("acme", rs)
	if strings.Contains(sealed, "thinking") || !strings.HasPrefix(sealed, "sfr1.") {
		t.Fatalf("seal %q", sealed)
	}
	if got, ok := s.Open("acme", sealed); !ok || !reflect.DeepEqual(got, rs) {
		t.Fatalf("opened %v, %v", got, ok)
	}
	if got, ok := s.Open("acme", old.Seal("acme", rs)); !ok || !reflect.DeepEqual(got, rs) {
		t.Errorf("a seal of the retired secret did not open: %v", ok)
	}
	if _, ok := s.Open("other-tenant", sealed); ok {
		t.Error("another tenant opened the seal")
	}
	if _, ok := other.Open("acme", sealed); ok {
		t.Error("another fleet opened the seal")
	}
	// A character in the middle always carries six bits of the sealed bytes (the last
	// ones may carry unused bits, or already be what they are changed to).
	altered := []byte(sealed)
	if i := len(altered) / 2; altered[i] == 'A' {
		altered[i] = 'B'
	} else {
		altered[i] = 'A'
	}
	if _, ok := s.Open("acme", string(altered)); ok {
		t.Error("an altered seal opened")
	}
}

// A Responses request's reasoning item with the fleet's seal is the model's own state
// again once opened, in its place before the call it led to, whatever the model's
// protocol; one that does not open is refused in OpenAI's words.
func TestSealedReasoningItemsComeBackAsTheModelsState(t *testing.T) {
	s, _ := wire.NewSealer(strings.Repeat("k", 32))
	for _, rs := range []wire.Reasoning{{Protocol: wire.Gemini, Signature: "gsig"}, {Protocol: wire.AnthropicMessages, Text: "t", Signature: "asig"},
		{Protocol: wire.OpenAIResponses, ID: "rs_1", Encrypted: "openai"}, {Protocol: wire.OpenAIChat, Text: "rc"}} {
		items := []any{map[string]any{"role": "user", "content": "q"},
			map[string]any{"type": "reasoning", "id": "rs_x", "summary": []any{}, "encrypted_content": s.Seal("acme", &rs)},
			map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": ""}}},
			map[string]any{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
			map[string]any{"type": "function_call_output", "call_id": "c1", "output": "x"}}
		body, _ := json.Marshal(map[string]any{"model": "m", "input": items, "include": []string{"reasoning.encrypted_content"}})
		req, err := responses.Client.DecodeRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		if !req.EncryptedReasoning {
			t.Error("include reasoning.encrypted_content not read")
		}
		if e := req.OpenReasoning(s, "other"); e == nil || e.Code != "invalid_encrypted_content" || e.Status != 400 {
			t.Errorf("another tenant's seal: %v", e)
		}
		req, _ = responses.Client.DecodeRequest(body)
		if e := req.OpenReasoning(s, "acme"); e != nil {
			t.Fatal(e)
		}
		parts := req.Messages[1].Parts
		if parts[0].Kind != wire.PartReasoning || !reflect.DeepEqual(*parts[0].Reasoning, rs) || parts[len(parts)-1].Kind != wire.PartToolCall {
			t.Errorf("%s: parts %+v", rs.Protocol, parts)
		}
	}
}

// A Responses model is sent the reasoning item that ended an assistant turn (a
// streamed answer's, which comes after its message) before the message, so that an
// item of the turn follows it, as OpenAI requires.
func TestTrailingReasoningGoesBeforeItsMessage(t *testing.T) {
	rs := wire.Part{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.OpenAIResponses, ID: "rs_1", Encrypted: "e"}}
	req := &wire.Request{Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "q"}}},
		{Role: wire.RoleAssistant, Parts: []wire.Part{{Kind: wire.PartText, Text: "answer"}, rs}},
		{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "next"}}}}}
	b, err := responses.Model.EncodeRequest(req, "gpt-5")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if r, m := strings.Index(s, `"type":"reasoning"`), strings.Index(s, `"content":"answer"`); r < 0 || m < 0 || r > m {
		t.Fatalf("the reasoning item does not come before its message: %s", s)
	}
	if req.Messages[1].Parts[0].Kind != wire.PartText {
		t.Error("the request was modified")
	}
}
