package engines

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// The tool-result text the main model reads is compact by construction: each part has
// a byte budget, so a result costs the model about
//
//	header ~60 B + summary ≤ SummaryBudget + per source ≤ TitleBudget + URLBudget + ~10 B
//	(+ SnippetBudget when the engine wrote no summary, as classic search APIs don't)
//
// ≈ 0.4–0.8 KB per hit with snippets, ≈ 0.2 KB without. A 10-hit classic result stays
// under ~8 KB; TestLLMContentBudget measures it on every recorded fixture.
const (
	SummaryBudget = 6000
	TitleBudget   = 120
	URLBudget     = 300
	SnippetBudget = 300
)

// markerRE is an [n] marker: one to three ASCII digits in brackets. Markers and
// RenumberMarkers find the same markers with nextMarker, which reads them without the
// regexp engine: they run over every title, snippet and summary the model reads.
var markerRE = regexp.MustCompile(`\[(\d{1,3})\]`)

// nextMarker finds the first [n] marker of s at or after from (what markerRE's next
// match would be): its bounds and number, or start -1 when there is none.
func nextMarker(s string, from int) (start, end, n int) {
	for {
		i := strings.IndexByte(s[from:], '[')
		if i < 0 {
			return -1, -1, 0
		}
		start = from + i
		j, n := start+1, 0
		for j < len(s) && j-start <= 3 && '0' <= s[j] && s[j] <= '9' {
			n = n*10 + int(s[j]-'0')
			j++
		}
		if j > start+1 && j-start <= 4 && j < len(s) && s[j] == ']' {
			return start, j + 1, n
		}
		from = start + 1
	}
}

// Markers returns the numbers of the [n] markers in text, in order of appearance.
func Markers(text string) []int {
	var out []int
	RenumberMarkers(text, func(n int) int {
		out = append(out, n)
		return n
	})
	return out
}

// RenumberMarkers rewrites every [n] marker in text to [f(n)], or removes it when f
// returns 0 or less.
func RenumberMarkers(text string, f func(n int) int) string {
	start, end, n := nextMarker(text, 0)
	if start < 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for start >= 0 {
		b.WriteString(text[last:start])
		if k := f(n); k > 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(k))
			b.WriteByte(']')
		}
		last = end
		start, end, n = nextMarker(text, end)
	}
	b.WriteString(text[last:])
	return b.String()
}

// BuildLLMContent renders the text the main model reads for a result: a header, the
// summary (with its [n] markers), and the numbered Sources list. When there is no
// summary, each source carries its hit's snippet instead. number maps a source's
// position (1-based) to the number shown, so a chain with several searches can number
// all its sources in one sequence; nil means identity. The markers in summary must
// already use the shown numbers.
func BuildLLMContent(query, summary string, sources []Source, hits []Hit, number func(int) int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Web search results for %q:\n\n", redact.Truncate(oneLine(query), 200))
	summary = strings.TrimSpace(CleanText(summary))
	if summary != "" {
		b.WriteString(redact.Truncate(summary, SummaryBudget))
		b.WriteString("\n\n")
	}
	if len(sources) == 0 {
		if summary == "" {
			b.WriteString("No results found.\n")
		}
		return b.String()
	}
	var snippets map[string]string
	if summary == "" {
		snippets = make(map[string]string, len(hits))
		for _, h := range hits {
			if h.Snippet != "" {
				snippets[h.URL] = h.Snippet
			}
		}
	}
	b.WriteString("Sources:\n")
	for i, s := range sources {
		n := i + 1
		if number != nil {
			n = number(n)
		}
		title := pageText(s.Web.Title)
		if title == "" {
			title = hostOf(s.Web.URI)
		}
		fmt.Fprintf(&b, "[%d] %s (%s)\n", n, redact.Truncate(title, TitleBudget), redact.Truncate(markerFreeURL.Replace(oneLine(s.Web.URI)), URLBudget))
		if sn := snippets[s.Web.URI]; sn != "" {
			b.WriteString("    ")
			b.WriteString(redact.Truncate(pageText(sn), SnippetBudget))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// ErrorResult is the result the main model reads when a search failed: the seed's
// WebSearchResult error shape, in words it can act on.
func ErrorResult(engine, query string, err error) *Result {
	e := AsError(engine, err)
	advice := "The search failed; answer from what you know and say the search was unavailable, or try again with a different query."
	switch e.Kind {
	case RateLimited, Unavailable:
		advice = "The search engine is busy or unavailable right now; try another engine if one is offered, or answer from what you know and say so."
	case BadRequest:
		advice = "The search engine rejected this query; rephrase it (shorter, plainer) and try again."
	case Auth, Quota:
		advice = "This search engine cannot be used right now; try another engine if one is offered, or answer from what you know and say so."
	}
	msg := e.Public()
	return &Result{
		Engine: engine,
		Query:  query,
		Hits:   []Hit{},
		Citation: Citation{
			LLMContent:    fmt.Sprintf("Error: web search for %q failed.\n\nDetails: %s\n\n%s", redact.Truncate(query, 200), msg, advice),
			ReturnDisplay: "Web search failed.",
			Error:         &CitationError{Type: e.Type(), Message: msg},
		},
	}
}

// InvalidArgumentsResult is the result for a web_search call whose arguments were
// rejected before any search ran (seed 003: INVALID_TOOL_ARGUMENTS, INVALID_QUERY).
func InvalidArgumentsResult(errType, display, details string) *Result {
	return &Result{
		Hits: []Hit{},
		Citation: Citation{
			LLMContent:    fmt.Sprintf("Error: %s\n\nDetails: %s", display, details),
			ReturnDisplay: display,
			Error:         &CitationError{Type: errType, Message: details},
		},
	}
}

// pageText is a title or snippet as the model reads it: on one line, cleaned, and
// without [n] markers, which in a tool result number the fleet's sources only (a page's
// own footnote marks, "born 1990[1]", would read as citations of the wrong source).
func pageText(s string) string {
	return oneLine(RenumberMarkers(s, func(int) int { return 0 }))
}

// markerFreeURL escapes the brackets of a URL shown to the model, so that no part of
// it reads as a [n] marker; the escaped URL is the same address.
var markerFreeURL = strings.NewReplacer("[", "%5B", "]", "%5D")

// oneLine is s cleaned (CleanText) on one line, runs of white space made one space.
func oneLine(s string) string {
	s = strings.TrimSpace(CleanText(s))
	if !breaksLine(s) {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// breaksLine reports whether s has a character oneLine turns into a space: \r, \n,
// \t, \v, \f, U+0085, U+00A0, U+2028 or U+2029. (strings.ContainsAny with those
// characters decodes every rune of s and searches the set for each.)
func breaksLine(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\r' || c == '\n' || c == '\t' || c == '\v' || c == '\f':
			return true
		case c == 0xc2 && i+1 < len(s) && (s[i+1] == 0x85 || s[i+1] == 0xa0): // U+0085, U+00A0
			return true
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9): // U+2028, U+2029
			return true
		}
	}
	return false
}

// CleanText removes what a page can use to show the model text a reader does not see,
// or to reorder what the reader sees: control characters (newline and tab stay),
// invisible format characters (zero-width space and joiners, the soft hyphen, the
// byte-order mark, bidi embeddings, overrides and isolates U+202A–202E and
// U+2066–2069, Unicode tag characters U+E0000–E007F: every character of category Cf),
// the combining grapheme joiner and the Hangul fillers. Invalid UTF-8 becomes U+FFFD.
// Search results are untrusted input to the model: titles, snippets and summaries go
// through CleanText before the model reads them.
func CleanText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, invisible) {
		return s // most text is clean: kept, not copied
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if !invisible(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// invisible reports whether CleanText removes r.
func invisible(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x80:
		return r < 0x20 || r == 0x7f
	case r == 0x034f, r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0:
		return true // combining grapheme joiner, Hangul fillers
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r)
}
