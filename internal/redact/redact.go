// Package redact hides secrets in what the fleet logs or shows: a leaf package, so
// the transport (pkg/bus) and the config layer can both use it without depending on
// each other.
package redact

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// URL hides a URL's password (and a user that may be a token).
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = url.User("***")
	return u.String()
}

// Clip shortens s, a value a client sent, to at most n runes (marking the cut with
// "…") so an error that names it does not echo a megabyte back. Invalid UTF-8 is
// replaced, so the clipped value is safe to quote.
func Clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	for k := range s {
		if n == 0 {
			return s[:k] + "…"
		}
		n--
	}
	return s
}

// Truncate shortens s to at most n bytes on a rune boundary, marking the cut: for a
// provider's or a parser's message that an error or a log line quotes.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Query hides the values of a URL's query string ("?q=secret+question&key=k" becomes
// "?q=***&key=***"): engine URLs carry the user's search query and sometimes a key,
// neither of which belongs in a log line. s is returned as is when it does not parse.
func Query(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.RawQuery == "" {
		return s
	}
	q := u.Query()
	for k := range q {
		q[k] = []string{"***"}
	}
	u.RawQuery = strings.ReplaceAll(q.Encode(), "%2A%2A%2A", "***")
	if u.User != nil {
		u.User = url.User("***")
	}
	return u.String()
}
