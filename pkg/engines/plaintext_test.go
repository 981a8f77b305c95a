package engines_test

import (
	"regexp"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// PlainText decodes, then strips, until nothing changes: no markup survives however it
// is encoded or nested, and text that only looks like markup's neighbour stays.
func TestPlainText(t *testing.T) {
	t.Parallel()
	live := regexp.MustCompile(`<[A-Za-z/!?]`)
	for in, want := range map[string]string{
		`Go &amp; Rust`:                  `Go & Rust`,
		`a < b and c > d`:                `a < b and c > d`,
		`<strong>bold</strong> text`:     `bold text`,
		`&lt;script&gt;x&lt;/script&gt;`: `x`,
		`&amp;lt;script&amp;gt;x`:        `x`,
		`<<b>script>x`:                   `x`,
		`&lt;&#8203;svg onload=x&gt;ok`:  `ok`,
		`tail &lt;script`:                `tail script`,
		`I &lt;3 Go`:                     `I <3 Go`,
	} {
		got := engines.PlainText(in)
		if got != want {
			t.Errorf("PlainText(%q) = %q, want %q", in, got, want)
		}
		if live.MatchString(got) {
			t.Errorf("PlainText(%q) = %q: a live tag", in, got)
		}
	}
}

// CleanText drops control and invisible characters and mends invalid UTF-8, and hands
// back clean text (ASCII or not) unchanged.
func TestCleanText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain ASCII, with\nnewline and\ttab", "plain ASCII, with\nnewline and\ttab"},
		{"bell\x07 null\x00 esc\x1b del\x7f cr\r", "bell null esc del cr"},
		{"café – naïve “quotes”", "café – naïve “quotes”"},
		{"zero\u200bwidth soft\u00adhyphen bidi\u202eover\u2066ride", "zerowidth softhyphen bidioverride"},
		{"tag\U000E0041chars and a \u034fjoiner", "tagchars and a joiner"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"", ""},
	} {
		if got := engines.CleanText(c.in); got != c.want {
			t.Errorf("CleanText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
