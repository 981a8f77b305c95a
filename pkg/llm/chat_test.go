package llm

import (
	"encoding/json"
	"testing"
)

func TestContentText(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]struct {
		text    string
		results bool
	}{
		`"hello"`: {"hello", false},
		`[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"input_text","text":"b"}]`: {"a\nb", false},
		`[{"type":"text","text":7},{"type":"text","text":"kept"}]`:                                                   {"kept", false},
		`[{"type":"tool_result","tool_use_id":"t","content":"r"}]`:                                                   {"", true},
		`null`: {"", false},
		``:     {"", false},
	} {
		text, results := ContentText(json.RawMessage(raw))
		if text != want.text || results != want.results {
			t.Errorf("%s → %q %v, want %q %v", raw, text, results, want.text, want.results)
		}
	}
}

// A request's tool names are read at validation.
func TestToolNames(t *testing.T) {
	t.Parallel()
	req, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"get_stock"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if names := req.ToolNames(); len(names) != 1 || names[0] != "get_stock" {
		t.Fatalf("tool names %v", names)
	}
}
