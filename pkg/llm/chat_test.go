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
