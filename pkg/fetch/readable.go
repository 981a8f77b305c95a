package fetch

import (
	"bytes"
	"cmp"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// HTML is reduced to readable text by walking the parsed document
// (golang.org/x/net/html, the Go project's HTML5 parser, already in the module graph)
// rather than with a readability port: those score nodes with heuristics tuned for
// news articles and drop documentation tables, lists and short pages; a model reading
// a page for facts is better served by all of its visible text, in order, without
// scripts, styles, navigation and forms. The parser follows the HTML5 algorithm, so a
// truncated or broken page still parses.

// Document is a page's readable form.
type Document struct {
	Title string
	Text  string
	Kind  string
}

// shellMinChars is how little visible text a page with scripts may have and still be
// called an app shell: "Loading…" or "You need to enable JavaScript" is no content.
const shellMinChars = 80

// skipped are elements whose content a reader does not see (or that only navigate).
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Svg: true,
	atom.Canvas: true, atom.Iframe: true, atom.Object: true, atom.Embed: true, atom.Head: true,
	atom.Nav: true, atom.Form: true, atom.Button: true, atom.Select: true, atom.Textarea: true,
	atom.Input: true, atom.Math: true,
}

// blocks are elements that start a new line.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true,
	atom.Header: true, atom.Footer: true, atom.Aside: true, atom.Ul: true, atom.Ol: true,
	atom.Li: true, atom.Table: true, atom.Tr: true, atom.Br: true, atom.Hr: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Pre: true, atom.Blockquote: true, atom.Dl: true, atom.Dt: true, atom.Dd: true,
	atom.Figure: true, atom.Figcaption: true, atom.Details: true, atom.Summary: true,
	atom.Caption: true, atom.Address: true,
}

// Readable reduces an HTML page to its title and visible text: the <main> or
// <article> element's when it holds most of the page's text, else the body's.
func Readable(body []byte) Document {
	root, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return Document{Kind: KindEmpty}
	}
	var d Document
	scripts, mounts := 0, 0
	var main *html.Node
	var bodyNode *html.Node
	var find func(*html.Node)
	find = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.DataAtom {
			case atom.Title:
				if d.Title == "" {
					d.Title = collapse(textOf(n))
				}
			case atom.Script:
				scripts++
			case atom.Main, atom.Article:
				if main == nil {
					main = n
				}
			case atom.Body:
				bodyNode = n
			}
			if mountPoint(n) {
				mounts++
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			find(c)
		}
	}
	find(root)
	text := render(cmp.Or(bodyNode, root))
	if main != nil {
		if mt := render(main); utf8.RuneCountInString(mt) >= utf8.RuneCountInString(text)/2 {
			text = mt
		}
	}
	d.Text = text
	n := utf8.RuneCountInString(text)
	switch {
	case scripts > 0 && (n == 0 || n < shellMinChars && mounts > 0):
		// Scripts and no text, or next to nothing beside an empty mount point: the
		// text is what the scripts would render.
		d.Kind = KindJSShell
	case n == 0:
		d.Kind = KindEmpty
	default:
		d.Kind = KindPage
	}
	return d
}

// render is the visible text under n: blocks on their own lines, list items marked,
// headings marked, runs of blank lines collapsed.
func render(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			b.WriteString(n.Data)
			return
		case html.ElementNode:
			if skipped[n.DataAtom] || hidden(n) {
				return
			}
			if blocks[n.DataAtom] {
				b.WriteByte('\n')
			}
			switch n.DataAtom {
			case atom.Li:
				b.WriteString("- ")
			case atom.H1, atom.H2, atom.H3:
				b.WriteString("## ")
			case atom.Td, atom.Th:
				b.WriteString(" | ")
			case atom.Img:
				if alt := attr(n, "alt"); strings.TrimSpace(alt) != "" {
					b.WriteString(" [image: " + alt + "] ")
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode && blocks[n.DataAtom] {
			b.WriteByte('\n')
		}
	}
	walk(n)
	return tidy(b.String())
}

// mountIDs are the ids single-page-app frameworks render into.
var mountIDs = map[string]bool{"root": true, "app": true, "__next": true, "__nuxt": true, "___gatsby": true, "svelte": true, "main-app": true, "q-app": true}

// mountPoint reports an element an app's scripts render into, still empty.
func mountPoint(n *html.Node) bool {
	_, ng := attrOK(n, "ng-app")
	if !mountIDs[strings.ToLower(attr(n, "id"))] && !ng {
		return false
	}
	return strings.TrimSpace(render(n)) == ""
}

// hidden reports an element the page hides from readers.
func hidden(n *html.Node) bool {
	if _, ok := attrOK(n, "hidden"); ok {
		return true
	}
	if strings.EqualFold(attr(n, "aria-hidden"), "true") {
		return true
	}
	style := strings.ReplaceAll(strings.ToLower(attr(n, "style")), " ", "")
	return strings.Contains(style, "display:none") || strings.Contains(style, "visibility:hidden")
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && strings.EqualFold(a.Key, key) {
			return a.Val, true
		}
	}
	return "", false
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// collapse makes white space runs one space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// tidy collapses the white space of each line and keeps at most one blank line
// between paragraphs.
func tidy(s string) string {
	var out []string
	blank := false
	for _, line := range strings.Split(s, "\n") {
		line = collapse(line)
		if line == "" || line == "-" || line == "##" {
			if len(out) > 0 {
				blank = true
			}
			continue
		}
		if blank {
			out = append(out, "")
			blank = false
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
