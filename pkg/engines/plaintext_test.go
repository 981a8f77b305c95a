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
