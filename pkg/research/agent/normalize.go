package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A provider's finished research becomes a Result: the report in Markdown with [n]
// markers into a numbered source list. Where the provider anchors citations in the
// text (OpenAI's, Gemini's and Perplexity's url_citation annotations), a marker goes
// right after each annotated span; where it links sources in Markdown, each link
// becomes a marker; where it attributes sources to output fields (Parallel's basis,
// Exa's grounding), the report lists the fields with their markers. A report whose
// sources could be placed nowhere cites them all at its end: what the provider said
// is supported by them, no finer.

// annotation is a url_citation anchored in a text: Start and End count code points
// (the unit OpenAI's and Perplexity's offsets are verified in, see SOURCES.md).
type annotation struct {
	Type       string `json:"type"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
	URL        string `json:"url"`
	Title      string `json:"title"`
}

// sources numbers sources by URL in order of first appearance.
type sources struct {
	list  []Source
	index map[string]int
}

// add returns the source's number (1-based), adding it when new; an excerpt or title
// fills in one the source had not.
func (s *sources) add(src Source) int {
	if s.index == nil {
		s.index = map[string]int{}
	}
	if n, ok := s.index[src.URL]; ok {
		had := &s.list[n-1]
		had.Title, had.Excerpt = cmp.Or(had.Title, src.Title), cmp.Or(had.Excerpt, src.Excerpt)
		return n
	}
	s.list = append(s.list, src)
	s.index[src.URL] = len(s.list)
	return len(s.list)
}

// marker is the [n] reference to source n.
func marker(n int) string { return "[" + strconv.Itoa(n) + "]" }

// annotate puts a marker after each annotated span of text (annotations with no span,
// 0/0, or outside the text are cited at the end) and returns the report. A span that
// is a Markdown link to its source (OpenAI annotates its "([site](url))") is replaced
// by the marker.
func annotate(text string, anns []annotation, src *sources) string {
	runes := []rune(text)
	type ins struct{ start, end, n int }
	var at []ins
	var loose []int
	for _, a := range anns {
		if a.URL == "" {
			continue
		}
		n := src.add(Source{URL: a.URL, Title: a.Title})
		if a.EndIndex <= 0 || a.EndIndex > len(runes) || a.StartIndex < 0 || a.StartIndex > a.EndIndex {
			loose = append(loose, n)
			continue
		}
		at = append(at, ins{a.StartIndex, a.EndIndex, n})
	}
	sort.SliceStable(at, func(i, j int) bool { return at[i].end < at[j].end })
	var b strings.Builder
	prev := 0
	for i, x := range at {
		if i > 0 && at[i-1].end == x.end && at[i-1].n == x.n {
			continue
		}
		cut := x.end
		if x.start >= prev && linkOnly.MatchString(string(runes[x.start:x.end])) {
			cut = x.start
		}
		b.WriteString(strings.TrimRight(string(runes[prev:cut]), " "))
		if i == 0 || at[i-1].end != x.end {
			b.WriteByte(' ')
		}
		b.WriteString(marker(x.n))
		prev = x.end
	}
	b.WriteString(string(runes[prev:]))
	return citeAtEnd(b.String(), loose)
}

// linkOnly matches a span that is nothing but a Markdown link, in parentheses or not.
var linkOnly = regexp.MustCompile(`^\s*(\(\[[^\]\n]*\]\(https?://[^)\s]+\)\)|\[[^\]\n]*\]\(https?://[^)\s]+\))\s*$`)

// citeAtEnd appends markers for the given sources when the text does not already
// cite them.
func citeAtEnd(text string, ns []int) string {
	var add []string
	for _, n := range ns {
		m := marker(n)
		if !strings.Contains(text, m) && !slices.Contains(add, m) {
			add = append(add, m)
		}
	}
	if len(add) == 0 {
		return text
	}
	return strings.TrimRight(text, "\n") + "\n\nSources: " + strings.Join(add, "")
}

var (
	mdLink    = regexp.MustCompile(`\[([^\]\n]+)\]\((https?://[^)\s]+)\)`)
	parenLink = regexp.MustCompile(`\s*\(\[([^\]\n]+)\]\((https?://[^)\s]+)\)\)`)
)

// linkMarkers turns each Markdown link of text into a marker, adding the linked page
// to src: a link in parentheses ("([site](url))", a citation) becomes the marker
// alone, a link in the text its text and the marker.
func linkMarkers(text string, src *sources) string {
	text = parenLink.ReplaceAllStringFunc(text, func(m string) string {
		p := parenLink.FindStringSubmatch(m)
		return " " + marker(src.add(Source{URL: p[2], Title: p[1]}))
	})
	return mdLink.ReplaceAllStringFunc(text, func(m string) string {
		p := mdLink.FindStringSubmatch(m)
		n := src.add(Source{URL: p[2], Title: p[1]})
		return p[1] + " " + marker(n)
	})
}

// spanBasis maps citations anchored in a JSON text (a structured answer given as
// text, with url_citation annotations over it) to the top-level fields whose values
// they fall in: each field's basis holds the citations inside its value. A field no
// citation falls in has a basis with no citations.
func spanBasis(text string, anns []annotation) (json.RawMessage, map[string]Basis) {
	raw := []byte(strings.TrimSpace(text))
	off := bytes.Index([]byte(text), raw) // where the trimmed JSON starts, in bytes
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil
	}
	type field struct {
		name       string
		start, end int // byte offsets into text
	}
	var fields []field
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil
		}
		name, _ := t.(string)
		start := int(dec.InputOffset())
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil, nil
		}
		fields = append(fields, field{name, off + start, off + int(dec.InputOffset())})
	}
	if !json.Valid(raw) {
		return nil, nil
	}
	// byteAt converts a code-point offset into a byte offset of text.
	byteAt := func(cp int) int {
		b := 0
		for i := 0; i < cp && b < len(text); i++ {
			_, w := utf8.DecodeRuneInString(text[b:])
			b += w
		}
		return b
	}
	basis := make(map[string]Basis, len(fields))
	for _, f := range fields {
		bs := Basis{Citations: []Source{}}
		for _, a := range anns {
			if a.URL == "" || a.EndIndex <= a.StartIndex {
				continue
			}
			s, e := byteAt(a.StartIndex), byteAt(a.EndIndex)
			if s < f.end && e > f.start && !slices.ContainsFunc(bs.Citations, func(c Source) bool { return c.URL == a.URL }) {
				bs.Citations = append(bs.Citations, Source{URL: a.URL, Title: a.Title})
			}
		}
		basis[f.name] = bs
	}
	return json.RawMessage(raw), basis
}

// fieldReport renders a structured answer as Markdown, one line per top-level field
// with the markers of its basis, so the report cites per field.
func fieldReport(out json.RawMessage, basis map[string]Basis, src *sources) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(out, &obj) != nil {
		return string(out)
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := string(obj[k])
		var s string
		if json.Unmarshal(obj[k], &s) == nil {
			v = s
		}
		fmt.Fprintf(&b, "- **%s**: %s", k, v)
		for _, c := range basis[k].Citations {
			b.WriteString(" " + marker(src.add(c)))
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// fielded is the result of an answer whose sources are attributed to its fields
// (Parallel's basis, Exa's grounding): a structured answer out keeps its object and
// basis, the report listing the fields with their markers after text (its Markdown
// links made markers); else text is the report, its links made markers and the
// loose sources cited at its end.
func fielded(out json.RawMessage, text string, basis map[string]Basis, loose []Source) *Result {
	var src sources
	res := &Result{}
	if len(out) > 0 {
		res.Output, res.Basis = out, basis
		res.Report = fieldReport(out, basis, &src)
		if text != "" {
			res.Report = linkMarkers(text, &src) + "\n\n" + res.Report
		}
	} else {
		text = linkMarkers(text, &src)
		var ns []int
		for _, c := range loose {
			ns = append(ns, src.add(c))
		}
		res.Report = citeAtEnd(text, ns)
	}
	res.Sources = src.list
	return res
}

// topField is the top-level field a field path names: "structured.companies[0].url"
// and "companies[0].url" are "companies".
func topField(path string) string {
	path = strings.TrimPrefix(path, "structured.")
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

// lowerConfidence is the lower of two confidences ("" counts as unknown, not low).
func lowerConfidence(a, b string) string {
	rank := map[string]int{"low": 1, "medium": 2, "high": 3}
	switch {
	case a == "":
		return b
	case b == "" || rank[a] <= rank[b]:
		return a
	}
	return b
}

// outputPart is one content part of a message: a Responses-shaped message item
// (OpenAI deep research, Perplexity's Agent API) or Gemini's model output.
type outputPart struct {
	Type        string       `json:"type"`
	Text        string       `json:"text"`
	Annotations []annotation `json:"annotations"`
}

// summary is a reasoning summary: OpenAI's reasoning item's, Gemini's thought step's.
type summary []struct {
	Text string `json:"text"`
}

// thoughts appends a thought event per part of the summary that says something.
func (s summary) thoughts(events []Event) []Event {
	for _, p := range s {
		if p.Text != "" {
			events = append(events, Event{Type: "thought", Text: p.Text})
		}
	}
	return events
}

// joinOutputText appends a message's text parts (of type typ: "output_text", Gemini's
// "text") to text and their annotations to anns; a later part's annotations count
// from its own start, so they are shifted by the runes before it.
func joinOutputText(parts []outputPart, typ, text string, anns []annotation) (string, []annotation) {
	for _, c := range parts {
		if c.Type != typ {
			continue
		}
		shift := len([]rune(text))
		for _, an := range c.Annotations {
			an.StartIndex += shift
			an.EndIndex += shift
			anns = append(anns, an)
		}
		text += c.Text
	}
	return text, anns
}

// cited is the result of text and its citation spans, after searches: a JSON answer
// keeps its object with a basis per field (the report lists the fields), else the
// text gets its [n] markers; the sources are those cited.
func cited(text string, anns []annotation, searches int) *Result {
	var src sources
	res := &Result{Searches: searches}
	if out, basis := spanBasis(text, anns); out != nil {
		res.Output, res.Basis = out, basis
		res.Report = fieldReport(out, basis, &src)
	} else {
		res.Report = annotate(text, anns, &src)
	}
	res.Sources = src.list
	return res
}

// runStates are the provider run statuses that are not running: queued, completed
// (incomplete too: the report so far), failed, cancelled.
var runStates = map[string]State{"queued": Queued, "completed": Completed, "incomplete": Completed, "failed": Failed, "cancelled": Cancelled}

// stateOf is the state of a provider's run status (runStates); anything else is
// running (in_progress, running, cancelling, action_required).
func stateOf(status string) State {
	if s, ok := runStates[status]; ok {
		return s
	}
	return Running
}

// failure is a failed run's client-safe text with the provider's reason, if any.
func failure(reason string) string {
	if reason == "" {
		return "the provider's research failed"
	}
	return "the provider's research failed: " + reason
}

// runError is a provider run's error object (OpenAI, Perplexity, Parallel; Gemini's
// errors are a list of them).
type runError struct {
	Message string `json:"message"`
}

// failure is the failed run's client-safe text (e nil: no reason given).
func (e *runError) failure() string {
	if e == nil {
		return failure("")
	}
	return failure(e.Message)
}

// noLookup is the Find of an agent whose provider offers no way to find a run by
// the fleet's reference.
type noLookup struct{}

func (noLookup) Find(context.Context, string, string) (string, bool, error) {
	return "", false, ErrNoLookup
}
