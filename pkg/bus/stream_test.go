package bus

import "testing"

// A delta is placed by its character offset: what a hop's relayed text already holds
// is dropped, only the new suffix passes; a delta past the relayed end (a gap) passes
// nothing. Offsets count characters, not bytes.
func TestStreamMsgOverlap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		offset int
		text   string
		have   int
		want   string
		ok     bool
	}{
		{0, "hello", 0, "hello", true},
		{0, "hello", 3, "lo", true},
		{0, "hello", 5, "", false},
		{2, "llo", 9, "", false},
		{5, " world", 3, "", false}, // a gap
		{0, "日本語です", 2, "語です", true},
		{3, "a", 3, "a", true},
	} {
		m := StreamMsg{Offset: c.offset, Text: c.text}
		got, ok := m.Overlap(c.have)
		if got != c.want || ok != c.ok {
			t.Errorf("offset %d %q over %d: got %q %v, want %q %v", c.offset, c.text, c.have, got, ok, c.want, c.ok)
		}
	}
	if end := (StreamMsg{Offset: 2, Text: "日本"}).End(); end != 4 {
		t.Errorf("End = %d, want 4", end)
	}
}
