package wire

import (
	"encoding/json"
	"testing"
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
	got := newTopLevel(0)
	for _, f := range fields {
		want[f.name] = f.value
		got.set(f.name, f.value)
	}
	got.del("stream_options")
	delete(want, "stream_options")
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := got.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(gb) != string(wb) {
		t.Errorf("topLevel wrote\n%s\nthe map\n%s", gb, wb)
	}
	if v, ok := got.get("model"); !ok || v != "m2" {
		t.Errorf("model = %v, %v; want m2", v, ok)
	}

	bad := newTopLevel(0)
	bad.set("a", json.RawMessage(`{"broken"`))
	_, gerr := bad.marshal()
	_, werr := json.Marshal(map[string]any{"a": json.RawMessage(`{"broken"`)})
	if gerr == nil || werr == nil || gerr.Error() != werr.Error() {
		t.Errorf("error %v; the map's %v", gerr, werr)
	}
	// The writer's buffer goes back to the pool clean after a failure.
	ok := newTopLevel(0)
	ok.set("a", 1)
	if b, _ := ok.marshal(); string(b) != `{"a":1}` {
		t.Errorf("after a failed marshal: %s", b)
	}
}
