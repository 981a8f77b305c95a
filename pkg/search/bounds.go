package search

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// A search result is bounded before it is cached, stored and published: its texts are
// cut (a title to maxTitle bytes, a snippet to maxSnippet, a source name to maxTitle,
// the summary and the rendered text to maxSummary), hits whose URL is longer than
// maxURL are dropped, and then the last hits until the result's JSON is at most
// maxResultBytes; the result's warnings say what was cut. The result travels in one
// NATS message (the resume message of its chain, well below NATS's 1 MB default max
// payload): one that still does not fit fails the call at once with an error result
// the model and the client read, instead of a message that can never be published.
const (
	maxTitle       = 1000
	maxSnippet     = 4000
	maxSummary     = 32000
	maxURL         = 4096
	maxResultBytes = 256 << 10
)

// bound cuts res to the bounds above; it reports whether res fits them.
func bound(res *engines.Result) bool {
	cut := false
	clip := func(s *string, n int) {
		if len(*s) > n {
			*s, cut = clipUTF8(*s, n), true
		}
	}
	clip(&res.Summary, maxSummary)
	clip(&res.Citation.LLMContent, maxSummary)
	hits := res.Hits[:0]
	for _, h := range res.Hits {
		if len(h.URL) > maxURL {
			cut = true
			continue
		}
		clip(&h.Title, maxTitle)
		clip(&h.Snippet, maxSnippet)
		clip(&h.Source, maxTitle)
		hits = append(hits, h)
	}
	res.Hits = hits
	for i := range res.Citation.Sources {
		clip(&res.Citation.Sources[i].Web.Title, maxTitle)
	}
	size := func() int { b, _ := json.Marshal(res); return len(b) }
	n := size()
	if n > maxResultBytes && len(res.Hits) > 0 {
		for n > maxResultBytes && len(res.Hits) > 0 {
			last := res.Hits[len(res.Hits)-1]
			b, _ := json.Marshal(last)
			n -= len(b) + 1
			res.Hits = res.Hits[:len(res.Hits)-1]
		}
		cut = true
		n = size()
	}
	if cut {
		res.Warnings = append(res.Warnings, fmt.Sprintf("The search result was cut to fit the fleet's bounds (titles %d bytes, snippets %d, the whole result %d); %d hits kept.", maxTitle, maxSnippet, maxResultBytes, len(res.Hits)))
	}
	return n <= maxResultBytes
}

// clipUTF8 is s cut to at most n bytes, on a character boundary.
func clipUTF8(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tooLarge is the error result of a search whose result cannot be delivered.
func tooLarge(req Request) *engines.Result {
	return engines.ErrorResult(req.Engine, req.Query.Query, &engines.Error{Kind: engines.Decode, Engine: req.Engine,
		Message: fmt.Sprintf("the engine's result is larger than the fleet delivers (%d bytes) even when cut", maxResultBytes)})
}
