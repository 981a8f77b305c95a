package openaichat

import (
	"encoding/json"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// TestTopLevelMarshalsAsMap holds topLevel to the bytes and errors of the
// map[string]any it replaced: names sorted and escaped as encoding/json escapes
// them, values HTML-escaped and raw JSON compacted, a later set replacing an earlier.
func TestTopLevelMarshalsAsMap(t *testing.T) {
	fields := []struct {
		name  string
		value any
	}{
		{"model", "m<1>"},
		{"messages", []any{&chatOutMessage{Role: "user", Content: "a & b"}}},
		{"x-<tag>", json.RawMessage(` { "a" : [1, 2] ,"h":"<b>"} `)},
		{"é", 1.5},
		{"quote\"d", nil},
		{"tab\tname", true},
		{"", "empty name"},
		{"max_tokens", 10},
		{"model", "m2"}, // replaces the first
		{"stream_options", chatStreamOptions{IncludeUsage: true}},
	}
	want := map[string]any{}
	got := wire.NewTopLevel(0)
	for _, f := range fields {
		want[f.name] = f.value
		got.Set(f.name, f.value)
	}
	got.Del("stream_options")
	delete(want, "stream_options")
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := got.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(gb) != string(wb) {
		t.Errorf("topLevel wrote\n%s\nthe map\n%s", gb, wb)
	}
	if v, ok := got.Get("model"); !ok || v != "m2" {
		t.Errorf("model = %v, %v; want m2", v, ok)
	}

	bad := wire.NewTopLevel(0)
	bad.Set("a", json.RawMessage(`{"broken"`))
	_, gerr := bad.Marshal()
	_, werr := json.Marshal(map[string]any{"a": json.RawMessage(`{"broken"`)})
	if gerr == nil || werr == nil || gerr.Error() != werr.Error() {
		t.Errorf("error %v; the map's %v", gerr, werr)
	}
}
