package engines

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The [n] markers read without the regexp engine are markerRE's matches, and
// breaksLine is strings.ContainsAny with oneLine's characters, on edge cases and on
// random strings of the characters that matter.
func TestMarkersReadAsTheRegexpDoes(t *testing.T) {
	viaRE := func(s string, f func(int) int) (string, []int) {
		var ns []int
		for _, m := range markerRE.FindAllStringSubmatch(s, -1) {
			n, _ := strconv.Atoi(m[1])
			ns = append(ns, n)
		}
		return markerRE.ReplaceAllStringFunc(s, func(m string) string {
			n, _ := strconv.Atoi(m[1 : len(m)-1])
			if k := f(n); k > 0 {
				return "[" + strconv.Itoa(k) + "]"
			}
			return ""
		}), ns
	}
	shift := func(n int) int { return (n*7)%5 - 1 }
	check := func(s string) {
		t.Helper()
		want, wantNs := viaRE(s, shift)
		if got := RenumberMarkers(s, shift); got != want {
			t.Fatalf("RenumberMarkers(%q) = %q, the regexp gives %q", s, got, want)
		}
		if got := Markers(s); !slices.Equal(got, wantNs) {
			t.Fatalf("Markers(%q) = %v, the regexp gives %v", s, got, wantNs)
		}
		const breaks = "\r\n\t\v\f\u0085\u00a0\u2028\u2029"
		if got, want := breaksLine(s), strings.ContainsAny(s, breaks); got != want {
			t.Fatalf("breaksLine(%q) = %v, ContainsAny %v", s, got, want)
		}
	}
	for _, s := range []string{
		"", "[", "]", "[]", "[1]", "[12]", "[123]", "[1234]", "[[1]]", "[1][2]", "a[1", "a[12",
		"[0]", "[007]", "x [3] y [99] z", "[1a]", "[-1]", "[ 1]", "[٣]", "end[5]", "[5]start",
		"\u00c2\u0085", "\u2027\u2028", "\u00a0", "\u0085", "\u2029", "\xc2", "\xe2\x80",
	} {
		check(s)
	}
	parts := []string{"[", "]", "1", "23", "4", "0", "a", " ", "\n", "\u00a0", "\u2028", "\u00c2", "é", "\u2027", "\xe2\x80", "\xc2"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		check(b.String())
	}
}
