package openresponses

import (
	"strings"
	"testing"
)

const validCompaction = `{"id":"cmp_1","object":"response.compaction","created_at":1,
"output":[{"type":"message","id":"msg_1","status":"completed","role":"user","content":[{"type":"input_text","text":"hi"}]},
 {"type":"compaction","id":"cmp_1_0","encrypted_content":"x"}],
"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}`

// Each rule catches the compaction that breaks it.
func TestCheckCompaction(t *testing.T) {
	if errs := CheckCompaction("c", decode(t, validCompaction)); len(errs) > 0 {
		t.Fatalf("a valid compaction: %v", errs)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"another object", `"response.compaction"`, `"response"`, "c.object"},
		{"no created_at", `"created_at":1,`, ``, "c.created_at: missing"},
		{"a compaction item without content", `,"encrypted_content":"x"`, ``, "output[1].encrypted_content: missing"},
		{"usage without totals", `"total_tokens":0,`, ``, "c.usage.total_tokens: missing"},
	} {
		errs := CheckCompaction("c", decode(t, strings.Replace(validCompaction, c.from, c.to, 1)))
		if !strings.Contains(strings.Join(errs, "\n"), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, errs, c.want)
		}
	}
}

// A WebSocket error needs a status and a string code.
func TestCheckSocketError(t *testing.T) {
	ok := `{"type":"error","status":400,"error":{"code":"previous_response_not_found","message":"m","param":"previous_response_id"}}`
	if errs := CheckSocketError("e", decode(t, ok)); len(errs) > 0 {
		t.Fatalf("a valid error: %v", errs)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"no status", `"status":400,`, ``, "e.status: missing"},
		{"a 200", `"status":400`, `"status":200`, "not an error status"},
		{"a null code", `"previous_response_not_found"`, `null`, "e.error.code: null"},
		{"a numeric param", `"previous_response_id"`, `1`, "e.error.param"},
	} {
		errs := CheckSocketError("e", decode(t, strings.Replace(ok, c.from, c.to, 1)))
		if !strings.Contains(strings.Join(errs, "\n"), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, errs, c.want)
		}
	}
}
