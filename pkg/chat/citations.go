package chat

import (
	"strconv"
	"strings"
)

// Citation integrity: an answer may cite only sources the job retrieved. Before an
// answer leaves the fleet, every [n] marker is checked against the chain's numbered
// sources (one sequence for the whole job, see sources): a marker with no source
// ([6] above a three-entry list, [0]) is removed from the text, so no annotation,
// citation block or source list can point at it. Titles and URLs of citations come
// from the retrieved results only (annotate, and the codecs from the trace), never
// from the model's text.
//
// A marker is "[" + one to three digits + "]", as engines.Markers reads them; a valid
// one is kept exactly as written. markerFilter applies the rule to a stream of deltas
// and checkCitations to a whole text through the same filter, so a streamed answer and
// the stored one are the same text whatever the deltas' boundaries.

// citationCount is what checking an answer's markers found (the job record's
// "citations").
type citationCount struct {
	Cited   int `json:"cited"`
	Valid   int `json:"valid"`
	Removed int `json:"removed"`
}

// checkCitations removes the markers of text that cite no source (n outside 1..n
// sources) and counts what it saw.
func checkCitations(text string, sources int) (string, citationCount) {
	f := newMarkerFilter(sources)
	out := f.Push(text) + f.Flush()
	return out, f.count
}

// markerFilter applies checkCitations to a text that arrives in pieces: Push returns
// what can be relayed at once, holding back a possible marker ("[", "[1", "[12", "[123")
// until it is complete or proves not to be one; Flush returns what is held at the end.
// Removing a marker never makes one: where the text before it ends in "[" and digits
// ("[[9]2]"), a space keeps it from joining what follows.
type markerFilter struct {
	sources int
	held    strings.Builder // "[" and up to three digits
	count   citationCount
	// open is how many bytes of what was relayed last are "[" and digits, up to 4 (a
	// marker's beginning); -1 when it does not end in one.
	open int
}

func (f *markerFilter) Push(s string) string {
	var out strings.Builder
	emit := func(b string) {
		out.WriteString(b)
		for i := 0; i < len(b); i++ {
			switch c := b[i]; {
			case c == '[':
				f.open = 1
			case c >= '0' && c <= '9' && f.open >= 1 && f.open < 4:
				f.open++
			default:
				f.open = -1
			}
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if f.held.Len() == 0 {
			if c == '[' {
				f.held.WriteByte(c)
			} else {
				emit(s[i : i+1])
			}
			continue
		}
		digits := f.held.Len() - 1
		switch {
		case c >= '0' && c <= '9' && digits < 3:
			f.held.WriteByte(c)
		case c == ']' && digits > 0:
			n, _ := strconv.Atoi(f.held.String()[1:])
			f.count.Cited++
			if n >= 1 && n <= f.sources {
				f.count.Valid++
				emit(f.held.String() + "]")
			} else {
				f.count.Removed++
				if f.open > 0 {
					emit(" ")
				}
			}
			f.held.Reset()
		default:
			// Not a marker: what was held is text. A "[" may start the next one.
			emit(f.held.String())
			f.held.Reset()
			if c == '[' {
				f.held.WriteByte(c)
			} else {
				emit(s[i : i+1])
			}
		}
	}
	return out.String()
}

func newMarkerFilter(sources int) *markerFilter { return &markerFilter{sources: sources, open: -1} }

// Flush returns the text still held (an unfinished marker at the end is text).
func (f *markerFilter) Flush() string {
	s := f.held.String()
	f.held.Reset()
	return s
}

// CheckCitations is checkCitations for a text the chain did not write (a research
// run's report): the text with its markers of no source removed, and the counts.
func CheckCitations(text string, sources int) (out string, cited, valid, removed int) {
	out, c := checkCitations(text, sources)
	return out, c.Cited, c.Valid, c.Removed
}
