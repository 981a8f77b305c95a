package research

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/searchfleet/searchfleet/pkg/chat"
)

// Verify checks every cited claim of a draft against the sources it cites: first
// the chain's own rule (chat.CheckCitations: a marker with no source is removed), then
// support: a sentence's marker stays only when the sentence shares enough of its
// words with what its source says (the excerpt: the passage of the child's answer
// that cited it, or the text of the page read). A sentence whose every marker falls
// is marked unverified. The basis of a structured output keeps only citations that
// resolve. The numbered source list is appended to the report.
func Verify(d Draft) Output {
	var out Output
	// The chain's checker counts the markers; the pass below removes what it would
	// (a marker of no source) and what no source supports, sentence by sentence.
	_, cited, valid, removed := chat.CheckCitations(d.Report, len(d.Sources))
	out.Citations = Citations{Cited: cited, Valid: valid, Removed: removed}
	var b strings.Builder
	for _, line := range strings.SplitAfter(d.Report, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
			continue
		}
		for _, s := range sentences(line) {
			b.WriteString(supported(s, d.Sources, &out.Citations))
		}
	}
	out.Report = strings.TrimRight(b.String(), "\n ")
	out.Sources = d.Sources
	if len(d.Sources) > 0 {
		var list strings.Builder
		list.WriteString("\n\n## Sources\n\n")
		for i, s := range d.Sources {
			fmt.Fprintf(&list, "%d. [%s](%s)\n", i+1, strings.ReplaceAll(cmp.Or(s.Title, s.URL), "]", ")"), s.URL)
		}
		out.Report += strings.TrimRight(list.String(), "\n")
	}
	if d.Object != nil {
		out.Object = d.Object
		out.Basis = map[string]Basis{}
		for k, v := range d.Basis {
			v.Citations = slices.DeleteFunc(append([]Source{}, v.Citations...), func(s Source) bool { return s.URL == "" })
			out.Basis[k] = v
		}
	}
	return out
}

// sentences splits a line after each sentence's end (and the markers that follow
// it), keeping every byte.
func sentences(line string) []string {
	var out []string
	start := 0
	for i := 0; i < len(line); i++ {
		if c := line[i]; c != '.' && c != '!' && c != '?' {
			continue
		}
		j := i + 1
		for {
			m := markerRE.FindStringIndex(line[j:])
			k := j
			for k < len(line) && line[k] == ' ' {
				k++
			}
			if m == nil || j+m[0] != k {
				break
			}
			j += m[1]
		}
		if j < len(line) && line[j] != ' ' && line[j] != '\n' {
			continue // "3.5", "example.com"
		}
		out = append(out, line[start:j])
		start, i = j, j-1
	}
	if start < len(line) {
		out = append(out, line[start:])
	}
	return out
}

// supported is a sentence with the markers its sources do not support removed
// (counted), marked unverified when none is left.
func supported(s string, sources []Source, c *Citations) string {
	ms := markerRE.FindAllStringSubmatchIndex(s, -1)
	if len(ms) == 0 {
		return s
	}
	claim := words(markerRE.ReplaceAllString(s, ""))
	var b strings.Builder
	last, kept := 0, 0
	for _, m := range ms {
		n, _ := strconv.Atoi(s[m[2]:m[3]])
		if n >= 1 && n <= len(sources) && supports(sources[n-1], claim) {
			b.WriteString(s[last:m[1]])
			last = m[1]
			kept++
			continue
		}
		b.WriteString(strings.TrimSuffix(s[last:m[0]], " "))
		last = m[1]
		if n >= 1 && n <= len(sources) {
			c.Valid-- // the chain's checker kept it: its source does not say it
			c.Removed++
		}
	}
	b.WriteString(s[last:])
	out := b.String()
	if kept == 0 {
		body := strings.TrimRight(out, " \n")
		end := strings.TrimRight(body, ".!?")
		out = end + " _(unverified)_" + out[len(end):]
	}
	return out
}

// supports reports whether a source's excerpt bears a claim: at least half of the
// claim's content words appear in it (a source with no excerpt cannot be checked
// and is taken at its word).
func supports(src Source, claim map[string]bool) bool {
	if strings.TrimSpace(src.Excerpt) == "" || len(claim) == 0 {
		return true
	}
	have := words(src.Excerpt + " " + src.Title)
	n := 0
	for w := range claim {
		if have[w] {
			n++
		}
	}
	return 2*n >= len(claim)
}

// words are a text's content words, lower case (three letters or more).
func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len([]rune(w)) >= 3 && !stop[w] {
			out[w] = true
		}
	}
	return out
}

var stop = map[string]bool{"the": true, "and": true, "for": true, "that": true, "with": true, "this": true, "are": true, "was": true,
	"from": true, "simulated": true, "answer": true, "its": true, "has": true, "have": true, "not": true, "but": true}
