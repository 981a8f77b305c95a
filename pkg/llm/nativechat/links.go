// Package nativechat reads the payloads of the OpenAI-Chat providers whose own web
// search the fleet forwards: Moonshot Kimi's answers, whose sources are the markdown
// links of their text (CiteLinks), and Zhipu GLM's web_search tool, results array and
// ref markers (GLMTool, GLMResults, GLMCite). The Kimi and GLM model codecs
// (openaichat.Kimi, openaichat.GLM) and the kimi, glm-chat and OpenRouter engines share them.
package nativechat

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// An answer whose sources come back only as links in its text (Kimi's $web_search;
// OpenRouter without annotations) is cited here, for main models and engines alike.

// linkRE matches a markdown link or image: [text](url), [text](<url>),
// [text](url "title"). URLs may hold one level of parentheses (Wikipedia's
// "Foo_(bar)"). RE2 keeps it linear on any input.
var linkRE = regexp.MustCompile(`(!?)\[([^\[\]\n]*)\]\(\s*<?(https?://(?:[^\s()<>]|\([^\s()<>]*\))+)>?(?:\s+"[^"\n]*")?\s*\)`)

// bareRE matches a bare http(s) URL; trailing punctuation is trimmed afterwards.
var bareRE = regexp.MustCompile(`https?://[^\s<>()\[\]{}"'` + "`" + `，。；！？、（）【】《》]+`)

// numericRE matches link texts that are citation numbers ("1", "^2", "[3]").
var numericRE = regexp.MustCompile(`^\^?[0-9]{1,3}$`)

// strayMarkerRE matches a model's own citation marker.
var strayMarkerRE = regexp.MustCompile(`\[[0-9]{1,3}\]`)

// LinkCiter numbers the pages an answer links to: each markdown link keeps its place
// and gets the [n] of its URL right after it, a bare URL gets " [n]" (URLs numbered by
// first appearance, the same URL the same n); a link whose text is only a number (a
// citation-style link) becomes its marker; [n] markers the model wrote itself are
// removed, since they number nothing the fleet knows. Images are not sources. Lines
// are converted one by one (a link never spans lines).
type LinkCiter struct {
	// Sources are the pages cited so far, numbered from 1.
	Sources []llm.NativeSource
	num     map[string]int
}

// CiteLinks converts a whole answer text and returns it with its sources.
func CiteLinks(text string) (string, []llm.NativeSource) {
	c := &LinkCiter{Sources: []llm.NativeSource{}}
	return c.Convert(text), c.Sources
}

// Convert converts text, numbering on from the pages cited before.
func (c *LinkCiter) Convert(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		b.WriteString(c.line(line))
	}
	return b.String()
}

// HasLinks reports whether text may cite: it holds a link (images included) or a bare
// URL.
func HasLinks(text string) bool { return linkRE.MatchString(text) || bareRE.MatchString(text) }

// cleanLine is a line that cites nothing as the conversion leaves it: without the
// model's own markers.
func cleanLine(line string) string { return strayMarkerRE.ReplaceAllString(line, "") }

// line converts one line.
func (c *LinkCiter) line(text string) string {
	var b strings.Builder
	b.Grow(len(text) + 16)
	prev := 0
	for _, m := range linkRE.FindAllStringSubmatchIndex(text, -1) {
		c.plain(&b, text[prev:m[0]])
		prev = m[1]
		link := text[m[0]:m[1]]
		if m[3] > m[2] { // "!": an image
			b.WriteString(link)
			continue
		}
		title := strings.Trim(text[m[4]:m[5]], " *_`<>")
		url := text[m[6]:m[7]]
		if title == url {
			title = ""
		}
		if numericRE.MatchString(strings.Trim(title, "[]")) {
			b.WriteString("[" + strconv.Itoa(c.number(url, "")) + "]")
			continue
		}
		b.WriteString(link)
		b.WriteString("[" + strconv.Itoa(c.number(url, title)) + "]")
	}
	c.plain(&b, text[prev:])
	return b.String()
}

// plain copies text outside markdown links: bare URLs get markers, stray markers go.
func (c *LinkCiter) plain(b *strings.Builder, s string) {
	prev := 0
	for _, m := range bareRE.FindAllStringIndex(s, -1) {
		u := strings.TrimRight(s[m[0]:m[1]], ".,;:!?*_~")
		if len(u) <= len("https://") {
			continue
		}
		b.WriteString(cleanLine(s[prev:m[0]]))
		b.WriteString(u)
		b.WriteString(" [" + strconv.Itoa(c.number(u, "")) + "]")
		prev = m[0] + len(u)
	}
	b.WriteString(cleanLine(s[prev:]))
}

// number returns the n of url, numbering it if it is new.
func (c *LinkCiter) number(url, title string) int {
	if c.num == nil {
		c.num = map[string]int{}
	}
	n, ok := c.num[url]
	if !ok {
		c.Sources = append(c.Sources, llm.NativeSource{URL: url, Title: title})
		n = len(c.Sources)
		c.num[url] = n
	} else if c.Sources[n-1].Title == "" && title != "" {
		c.Sources[n-1].Title = title
	}
	return n
}
