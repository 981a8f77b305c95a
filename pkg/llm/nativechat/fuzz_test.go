package nativechat

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
)

// The native readers read what GLM and Kimi send back: the web_search array of a GLM
// answer (whole or streamed), the refer markers its text cites, and the markdown
// links a Kimi answer cites. Any input
// must be read without a panic, and what is read must hold together.

// markerRE is an [n] marker.
var markerRE = regexp.MustCompile(`\[([0-9]+)\]`)

func seedFixtures(f *testing.F, globs ...string) {
	for _, g := range globs {
		names, err := fs.Glob(fixtures.FS(), g)
		if err != nil || len(names) == 0 {
			f.Fatalf("no fixtures match %s: %v", g, err)
		}
		for _, n := range names {
			f.Add(fixtures.Read(n), "")
		}
	}
}

// FuzzGLMReader: any body is read into search items or none, and the answer text
// cites them with [n] markers that each number a page it returned, every page a link
// of the body's items.
func FuzzGLMReader(f *testing.F) {
	seedFixtures(f, "zhipu/*.response.json", "zhipu/*.CONSTRUCTED.json")
	f.Add([]byte(`{"web_search":[{"refer":"ref_1","link":"https://a.example/","title":"A（发布时间：2026-01-27 10:31:42）"},{"link":"https://b.example/"}]}`), "Sunny [ref_1] and [来源：ref_2, ref_1] 【ref_9】 [3]\n(ref_2)")
	f.Add([]byte("data: {\"web_search\":[{\"refer\":\"ref_1\",\"link\":\"https://a.example/\"}]}\n\ndata: [DONE]\n\n"), "x [ref_1]")
	f.Add([]byte(`{"web_search":null}`), "[ref_")
	f.Fuzz(func(t *testing.T, body []byte, text string) {
		items := GLMResults(body)
		out, sources := GLMCite(text, items)
		links := map[string]bool{}
		for _, it := range items {
			links[it.Link] = true
		}
		for _, s := range sources {
			if !links[s.URL] || s.URL == "" {
				t.Fatalf("source %q is no link of the items", s.URL)
			}
		}
		for _, m := range markerRE.FindAllStringSubmatch(out, -1) {
			if n := atoi(m[1]); n < 1 || n > len(sources) {
				// A marker the text kept from the model's own words would be removed
				// by cleanLine; one that numbers nothing is a bug.
				if !strings.Contains(text, m[0]) {
					t.Fatalf("marker %s numbers none of %d sources: %q", m[0], len(sources), out)
				}
			}
		}
	})
}

// FuzzKimiReader: the text of any assistant message has its links numbered from 1 in
// order, one number per URL (wire's Kimi model codec reads the calls).
func FuzzKimiReader(f *testing.F) {
	seedFixtures(f, "moonshot/*.response.json")
	f.Add([]byte(`{"role":"assistant","content":"See [Go](https://go.dev/) and [1](https://a.example/) [7]","tool_calls":[{"id":"c1","type":"builtin_function","function":{"name":"$web_search","arguments":"{}"}},{"id":"c2","function":{"name":"web_search"}}]}`), "A [x](https://a.example/)\n![img](https://i.example/p.png) [2]")
	f.Add([]byte(`{"content":null,"tool_calls":null}`), "[](https://a.example/)")
	f.Add([]byte(`{"tool_calls":[5]}`), "[a](b")
	f.Fuzz(func(t *testing.T, msg []byte, text string) {
		var top struct {
			Choices []struct {
				Message json.RawMessage `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(msg, &top) == nil && len(top.Choices) > 0 && len(top.Choices[0].Message) > 0 {
			msg = top.Choices[0].Message // a whole response body: its message
		}
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(msg, &m) == nil {
			text += "\n" + llm.Text(m.Content)
		}
		c := &LinkCiter{}
		out := c.Convert(text)
		seen := map[string]bool{}
		for i, s := range c.Sources {
			if c.num[s.URL] != i+1 || seen[s.URL] {
				t.Fatalf("source %d %q numbered %d", i+1, s.URL, c.num[s.URL])
			}
			seen[s.URL] = true
		}
		for _, m := range markerRE.FindAllStringSubmatch(out, -1) {
			if n := atoi(m[1]); (n < 1 || n > len(c.Sources)) && !strings.Contains(text, m[0]) {
				t.Fatalf("marker %s numbers none of %d sources: %q", m[0], len(c.Sources), out)
			}
		}
	})
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
		if n > 1<<20 {
			return -1
		}
	}
	return n
}
