package chat

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

func TestCheckCitations(t *testing.T) {
	for _, c := range []struct {
		in, want string
		count    citationCount
	}{
		{"Prices rose [1][2]; see [6].", "Prices rose [1][2]; see .", citationCount{3, 2, 1}},
		{"[0] and [3] and [03] and [004]", " and [3] and [03] and ", citationCount{4, 2, 2}},
		{"no markers [x] [] [1234] [[2]]", "no markers [x] [] [1234] [[2]]", citationCount{1, 1, 0}},
		{"北京 [4]，上海 [1]", "北京 ，上海 [1]", citationCount{2, 1, 1}},
		{"[[12]9] and [2[7]]", "[ 9] and [2 ]", citationCount{2, 0, 2}}, // a removal makes no marker
	} {
		got, n := checkCitations(c.in, 3)
		if got != c.want || n != c.count {
			t.Errorf("checkCitations(%q) = %q %+v, want %q %+v", c.in, got, n, c.want, c.count)
		}
	}
}

// The filter gives the stored answer's text whatever the deltas' boundaries.
func TestMarkerFilterMatchesWholeText(t *testing.T) {
	alphabet := []string{"[", "]", "1", "2", "3", "4", "9", "0", "a", " ", "北", "[1]", "[12]", "[[", "]]"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		text := b.String()
		want, wantCount := checkCitations(text, 3)
		f := newMarkerFilter(3)
		var got strings.Builder
		for rest := text; rest != ""; {
			n := min(len(rest), 1+r.IntN(5))
			got.WriteString(f.Push(rest[:n]))
			rest = rest[n:]
		}
		got.WriteString(f.Flush())
		if got.String() != want || f.count != wantCount {
			t.Fatalf("text %q: streamed %q %+v, whole %q %+v", text, got.String(), f.count, want, wantCount)
		}
		if n := len(engines.Markers(text)); n != wantCount.Cited {
			t.Fatalf("text %q: %d markers counted, engines.Markers reads %d", text, wantCount.Cited, n)
		}
		if kept := engines.Markers(want); len(kept) != wantCount.Valid || slices.ContainsFunc(kept, func(n int) bool { return n < 1 || n > 3 }) {
			t.Fatalf("text %q: kept markers %v of %q", text, kept, want)
		}
	}
}
