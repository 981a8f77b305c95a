package fetch

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzReadable: any page body, under any Content-Type, is decoded to UTF-8 and
// reduced to readable text without a panic; the kind is one of the three; a page's
// text cut to a budget is a prefix of it on a character boundary.
func FuzzReadable(f *testing.F) {
	for _, s := range []struct{ body, ct string }{
		{`<html><head><title>Guide &amp; more</title></head><body><main><h1>Hi</h1><p>Text</p><ul><li>a</li></ul></main></body></html>`, "text/html; charset=utf-8"},
		{"<html><head><meta charset=\"gbk\"><title>\xc4\xe3\xba\xc3</title></head><body><p>\xd6\xd0\xce\xc4</p></body></html>", "text/html"},
		{"<p>\x82\xb1\x82\xf1\x82\xc9\x82\xbf\x82\xcd</p>", "text/html; charset=shift_jis"},
		{"\xef\xbb\xbf<p>bom</p>", ""},
		{"\xff\xfe<\x00p\x00>\x00", ""},
		{`<html><body><div id="root"></div><script src="app.js"></script><noscript>You need to enable JavaScript</noscript></body></html>`, "text/html"},
		{`<table><tr><td>a<td>b</table><pre>  code  </pre><svg><text>x</text></svg><template><p>t</p></template>`, "application/xhtml+xml"},
		{`{"a":"<b>x</b>"}`, "application/json; charset=iso-8859-1"},
		{"plain\x00text\xff", "text/plain; charset=windows-1252"},
		{"<title>" + strings.Repeat("<div>", 300) + "deep", "text/html"},
		{"", ""},
	} {
		f.Add([]byte(s.body), s.ct)
	}
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		mt := mediaType(header, body)
		b := toUTF8(body, mt, header)
		if mt != "text/html" && mt != "application/xhtml+xml" {
			return
		}
		d := Readable(b)
		switch d.Kind {
		case KindPage, KindJSShell, KindEmpty:
		default:
			t.Fatalf("kind %q", d.Kind)
		}
		if strings.ContainsAny(d.Title, "\n\r") {
			t.Fatalf("title on several lines: %q", d.Title)
		}
		if d.Kind == KindPage && strings.TrimSpace(d.Text) == "" {
			t.Fatalf("a page without text")
		}
		for _, n := range []int{0, 1, 7, 100} {
			cut, ok := CutRunes(d.Text, n)
			if !strings.HasPrefix(d.Text, cut) || ok && utf8.RuneCountInString(cut) != n {
				t.Fatalf("CutRunes(%d) = %q, %v", n, cut, ok)
			}
			if utf8.ValidString(d.Text) && !utf8.ValidString(cut) {
				t.Fatalf("CutRunes(%d) split a character", n)
			}
		}
	})
}
