package intent_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/intent"
)

// web_fetch takes one absolute http(s) URL; anything else is an argument error the
// model reads.
func TestParseFetch(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		`{"url":"https://example.com/a?b=1"}`:  "https://example.com/a?b=1",
		`{"url":"  http://example.com/  "}`:    "http://example.com/",
		`"{\"url\":\"https://example.com/\"}"`: "https://example.com/", // encoded twice, as some models do
	} {
		if got, err := intent.ParseFetch(args); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", args, got, err, want)
		}
	}
	for _, args := range []string{``, `{}`, `{"url":""}`, `{"url":5}`, `{"url":"ftp://example.com/"}`, `{"url":"example.com"}`,
		`{"url":"https://example.com/","query":"x"}`, `{"url":"https://example.com/` + strings.Repeat("a", intent.MaxFetchURLChars) + `"}`, `{"url": "unterminated`} {
		_, err := intent.ParseFetch(args)
		if err == nil || err.Type != intent.InvalidToolArguments || err.Result().Citation.Error == nil {
			t.Errorf("%.60s: accepted (%v)", args, err)
		}
	}
}

// A URL with credentials (user:password@) is refused with words the model can act
// on, and the refusal does not repeat them.
func TestParseFetchRefusesCredentials(t *testing.T) {
	t.Parallel()
	for _, args := range []string{`{"url":"https://alice:hunter2@example.com/private"}`, `{"url":"http://alice@example.com/"}`, `{"url":"https://:hunter2@example.com/"}`} {
		u, err := intent.ParseFetch(args)
		if err == nil {
			t.Errorf("%s: accepted as %q", args, u)
			continue
		}
		res := err.Result()
		text := res.Citation.LLMContent + res.Citation.Error.Message + res.Query
		if !strings.Contains(text, "without the user:password@ part") {
			t.Errorf("%s: the model is not told what to do: %q", args, text)
		}
		if strings.Contains(text, "hunter2") || strings.Contains(text, "alice") {
			t.Errorf("%s: the refusal repeats the credentials: %q", args, text)
		}
	}
}

// URLs finds the http(s) URLs of a user's text, without trailing punctuation.
func TestURLs(t *testing.T) {
	t.Parallel()
	got := intent.URLs(`Compare https://a.example/x, and (http://b.example/y). Not ftp://c.example or "https://"`)
	if want := []string{"https://a.example/x", "http://b.example/y"}; !slices.Equal(got, want) {
		t.Fatalf("URLs %q, want %q", got, want)
	}
	got = intent.URLs("Read https://[2001:db8::1]:8443/page?q=1 and http://[::1]/, not [https://x]")
	if want := []string{"https://[2001:db8::1]:8443/page?q=1", "http://[::1]/", "https://x"}; !slices.Equal(got, want) {
		t.Fatalf("URLs %q, want %q", got, want)
	}
	if got := intent.URLs("no links here"); len(got) != 0 {
		t.Fatalf("URLs %q", got)
	}
}
