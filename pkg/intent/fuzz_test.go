package intent

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// FuzzClassify checks that Classify never panics and agrees with the naive reference
// implementation, with and without opt-in sets, on any bytes.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"", "research the history of Rome", "帮我搜一下最新新闻", "谷歌一下 weather", "please google the latest news",
		"find information online", "Search the web for Go 1.26 release notes", "我想上网看看", "查找信息", "搜索",
		"WEB SEARCH", "/search foo", "weather in Paris today", "2web search", "search  the\n\tweb", "look it up online",
		"\xff\xfe\xe8\xb0", "\xe8\xb0\xb7\xe6\xad\x8c", "谷\xff歌搜索", "search\x00the web", "#news 5g 天气",
		strings.Repeat("a", 63) + " search the web", strings.Repeat("x", 64) + "谷歌一下", benchLateHit,
	} {
		f.Add(s)
	}
	extra := []KeywordSet{Freshness, {Name: "custom", Keywords: []string{"天气", "#news", "5g", "Stock  Price", " ", "\xff"}}}
	c := NewClassifier(extra...)
	plain, withSets := newRef(nil), newRef(extra)
	f.Fuzz(func(t *testing.T, s string) {
		got, gotX := Classify(s), c.Classify(s)
		// The reference tries every phrase at every position: under the fuzzer's
		// coverage instrumentation, long inputs make each run (and minimizing a
		// finding) slow; longer inputs than 256 bytes are checked for panics and consistency.
		if len(s) <= 256 {
			if want := plain.classify(s); got != want {
				t.Fatalf("Classify(%q) = %+v, reference %+v", s, got, want)
			}
			if want := withSets.classify(s); gotX != want {
				t.Fatalf("with sets: Classify(%q) = %+v, reference %+v", s, gotX, want)
			}
		}
		for _, r := range []Result{got, gotX} {
			if !r.WebSearch && (r != Result{}) || r.WebSearch && (r.Rule == "" || r.Match == "") {
				t.Fatalf("inconsistent %+v", r)
			}
		}
	})
}

// FuzzParse checks that Parse never panics and that what it accepts is a query an
// engine accepts, on an engine it offered.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "{}", "null", "[]", `"x"`, `"{\"query\":\"x\"}"`, `{"query":"x"}`, `{"query":"","engine":"glm"}`,
		`{"engine":"glm","query":"今天的国际新闻头条","count":3}`, `{"query":"x","count":5.0,"recency":"oneDay"}`,
		`{"query":"x","count":"5"}`, `{"query":"x","count":1e400}`, `{"query":"x","allowed_domains":["https://www.bbc.co.uk/news","*.ft.com."]}`,
		`{"query":"x","foo":1}`, `{"query":"\xff\xfe"}`, "{\"query\":\"x\",\"engine\":\"GOOGLE\"}", `{"query":"x","blocked_domains":[1]}`,
		"{\"query\":\"\xe8\xb0\"}", `{"query":"x"}{}`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	sets := []*Toolset{mustToolset(f, oneEngine), mustToolset(f, twoEnginesNoDefault), mustToolset(f, manyEngines)}
	types := []string{InvalidToolArguments, InvalidQuery, InvalidEngine, EngineRequired}
	f.Fuzz(func(t *testing.T, args string, google bool) {
		for _, ts := range sets {
			call, aerr := ts.Parse(args, google)
			if aerr != nil {
				if !slices.Contains(types, aerr.Type) || aerr.Display == "" || aerr.Details == "" {
					t.Fatalf("Parse(%q) error %+v", args, aerr)
				}
				if r := aerr.Result(); r.Citation.Error == nil || r.Citation.LLMContent == "" || !utf8.ValidString(r.Citation.LLMContent) {
					t.Fatalf("Parse(%q) error result %+v", args, r)
				}
				continue
			}
			if !slices.Contains(ts.IDs(google), call.Engine) {
				t.Fatalf("Parse(%q) chose %q, not offered (%v)", args, call.Engine, ts.IDs(google))
			}
			if q, err := engines.CheckQuery(call.Query); err != nil || !slices.Equal(q.AllowedDomains, call.Query.AllowedDomains) || q.Query != call.Query.Query {
				t.Fatalf("Parse(%q) = %+v, which CheckQuery does not keep as is: %v", args, call.Query, err)
			}
			if utf8.RuneCountInString(call.Query.Query) > MaxQueryChars {
				t.Fatalf("Parse(%q): query too long", args)
			}
		}
	})
}
