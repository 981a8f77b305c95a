package llm

import (
	"encoding/json"
	"testing"
)

func TestText(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`"hello"`: "hello",
		`[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"input_text","text":"b"}]`: "a\nb",
		`[{"type":"text","text":7},{"type":"text","text":"kept"}]`:                                                   "kept",
		`[{"type":"tool_result","tool_use_id":"t","content":"r"}]`:                                                   "",
		`"unterminated`: "",
		`null`:          "",
		``:              "",
	} {
		if text := Text(json.RawMessage(raw)); text != want {
			t.Errorf("%s → %q, want %q", raw, text, want)
		}
	}
}
