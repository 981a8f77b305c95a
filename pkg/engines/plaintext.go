package engines

import (
	"html"
	"strings"
)

// PlainText turns text a provider or a page gave (a title, a snippet) into plain text
// with no markup a reader could render: entities are decoded first and tags stripped
// after, repeatedly until nothing changes. Stripping before decoding (the old order)
// let "&lt;script&gt;" through as a live <script> once decoded; decoding only once let
// "&amp;lt;script&amp;gt;" become one in a client that decodes again. What remains is
// text in which no '<' starts a tag ("a < b" stays), so a client that puts a title
// into HTML without escaping it renders no element, and the Markdown the model reads
// (LLMContent) carries no raw HTML. Block-level tags (br, p, div, li) become a line
// break. Invisible characters go too (CleanText).
func PlainText(s string) string {
	if strings.IndexByte(s, '&') < 0 && strings.IndexByte(s, '<') < 0 {
		return CleanText(s)
	}
	// Each round removes at least one byte or stops, so a crafted nesting of entities
	// and tags ends; the bound keeps a pathological title from costing much.
	for range 8 {
		// CleanText inside the round: an invisible character between '<' and a
		// tag's name ("&lt;&#8203;script&gt;") would otherwise hide the tag from
		// stripTags and vanish after it.
		next := stripTags(CleanText(html.UnescapeString(s)))
		if next == s {
			return s
		}
		s = next
	}
	return noTags(s)
}

// noTags is the last resort of PlainText for text that still changed after its rounds:
// every '<' that could start a tag is dropped.
func noTags(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '<' && i+1 < len(s) && tagStart(s[i+1]) {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// stripTags removes HTML tags: a '<' followed by a letter, '/', '!' or '?' up to the
// next '>'. Block-level breaks (br, p, div, li) become a line break, which oneLine then
// turns into a space; a lone '<' ("a < b") is kept. A '<' that starts a tag but has
// no '>' after it is dropped (the text after it is kept): put before more markup, it
// would open a tag.
func stripTags(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '<' || i+1 >= len(s) || !tagStart(s[i+1]) {
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '>')
		if end < 0 {
			b.WriteString(s[i+1:])
			break
		}
		name := strings.ToLower(strings.TrimLeft(s[i+1:i+end], "/"))
		for _, block := range []string{"br", "p", "div", "li"} {
			if name == block || strings.HasPrefix(name, block+" ") || strings.HasPrefix(name, block+"/") {
				b.WriteByte('\n')
				break
			}
		}
		i += end + 1
	}
	return b.String()
}

func tagStart(c byte) bool {
	return c == '/' || c == '!' || c == '?' || (c|0x20) >= 'a' && (c|0x20) <= 'z'
}
