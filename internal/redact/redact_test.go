package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 1<<20)
	if got := Clip(long, 64); got != strings.Repeat("é", 64)+"…" {
		t.Fatalf("Clip kept %d bytes", len(got))
	}
	if got := Clip("gpt-4o", 64); got != "gpt-4o" {
		t.Fatalf("short value changed: %q", got)
	}
	if got := Clip("a\xffb", 64); got != "a\uFFFDb" {
		t.Fatalf("invalid UTF-8 kept: %q", got)
	}
}

func TestQuery(t *testing.T) {
	got := Query("http://user:pw@10.0.0.5:8080/search?q=my+secret+question&key=sk-123&format=json")
	for _, leak := range []string{"secret", "question", "sk-123", "pw", "json"} {
		if strings.Contains(got, leak) {
			t.Fatalf("%q kept in %s", leak, got)
		}
	}
	if !strings.Contains(got, "/search?") || !strings.Contains(got, "q=***") {
		t.Fatalf("the URL's shape is lost: %s", got)
	}
	if got := Query("https://api.example/v1/search"); got != "https://api.example/v1/search" {
		t.Fatalf("a URL without a query changed: %s", got)
	}
}

// Truncate cuts on a rune boundary, so a provider's message in Chinese quoted in an
// error stays valid UTF-8.
func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"héllo", 2, "h…"}, {"日本語", 4, "日…"}, {"short", 10, "short"}, {"日本語", 9, "日本語"}} {
		if got := Truncate(c.in, c.n); got != c.want || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
