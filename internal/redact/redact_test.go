package redact

import (
	"strings"
	"testing"
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
