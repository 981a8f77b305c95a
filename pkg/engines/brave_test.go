package engines_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

// This file also holds the test helpers the classic kinds' tests share (classic*).

const braveWeb = "brave/docs-shape-web-search.CONSTRUCTED.json"

func TestBraveConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "brave"},
		OK:     []enginetest.Response{enginetest.JSON(braveWeb)},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 5 { // the suite asks for 5 of the fixture's 6
				t.Fatalf("hits = %d, want 5", len(r.Hits))
			}
			h := r.Hits[0]
			if h.Title != "Tutorial: Getting started with generics - The Go Programming Language" || h.URL != "https://go.dev/doc/tutorial/generics" {
				t.Errorf("hit 1 = %q %q", h.Title, h.URL)
			}
			if !strings.HasPrefix(h.Snippet, "This tutorial introduces the basics of generics in Go. With generics,") {
				t.Errorf("snippet 1 = %q", h.Snippet)
			}
			if !strings.Contains(r.Citation.LLMContent, "[2] An Introduction To Generics - The Go Programming Language (https://go.dev/blog/intro-generics)") {
				t.Errorf("LLMContent lacks numbered source 2:\n%s", r.Citation.LLMContent)
			}
			if r.Usage.CostUSD != 0.005 || r.Usage.Searches != 1 {
				t.Errorf("usage = %+v", r.Usage)
			}
			if len(r.Warnings) != 0 {
				t.Errorf("warnings = %v", r.Warnings)
			}
		},
		Empty: []enginetest.Response{{Body: []byte(`{"type":"search","query":{"original":"zzqx","more_results_available":false},"mixed":{"type":"mixed","main":[],"top":[],"side":[]}}`)}},
		RateLimited: enginetest.Response{
			Status: http.StatusTooManyRequests,
			Header: http.Header{
				"X-Ratelimit-Limit":     {"1, 15000"},
				"X-Ratelimit-Policy":    {"1;w=1, 15000;w=2592000"},
				"X-Ratelimit-Remaining": {"0, 14973"},
				"X-Ratelimit-Reset":     {"1, 1419704"},
			},
			Body: fixtures.Read("brave/docs-shape-429-rate-limited.CONSTRUCTED.json"),
		},
		WantRetryAfter: time.Second,
		ServerError:    enginetest.Status(503, `{"type":"ErrorResponse","error":{"id":"0b6c","status":503,"code":"SERVICE_UNAVAILABLE","detail":"Service temporarily unavailable."}}`),
		AuthError:      enginetest.Status(401, "brave/docs-shape-422-subscription-token-invalid.CONSTRUCTED.json"),
		QueryOf:        func(r *http.Request, _ []byte) string { return r.URL.Query().Get("q") },
		KeyOf:          func(r *http.Request) string { return r.Header.Get("X-Subscription-Token") },
	})
}

// Every value of the constructed success fixture: HTML stripped, entities unescaped,
// dates from page_age or age, extra snippets standing in for an empty description.
func TestBraveWebSearchFixture(t *testing.T) {
	t.Parallel()
	before := time.Now()
	res, err := engines.Normalize(engines.Config{Kind: "brave"}, engines.Query{Query: "go generics tutorial"}, fixtures.Read(braveWeb))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	want := []struct {
		title, url, source, snippet string
		published                   time.Time
	}{
		{"Tutorial: Getting started with generics - The Go Programming Language", "https://go.dev/doc/tutorial/generics", "go.dev",
			"This tutorial introduces the basics of generics in Go. With generics, you can declare and use functions or types that are written to work with any of a set of types provided by calling code. It's a good place to start & experiment.",
			time.Date(2022, 3, 22, 0, 0, 0, 0, time.UTC)},
		{"An Introduction To Generics - The Go Programming Language", "https://go.dev/blog/intro-generics", "go.dev",
			"The Go 1.18 release adds support for generics. Generics are the biggest change we've made to Go since the first open source release. In this article we'll introduce the new language features.",
			time.Date(2022, 3, 22, 12, 0, 0, 0, time.UTC)},
		{"Go 语言泛型入门教程 🚀 | 菜鸟教程", "https://www.runoob.com/go/go-generics.html", "runoob.com", "", time.Time{}},
		{"Generics in Go: a practical guide – Bitfield Consulting", "https://bitfieldconsulting.com/posts/generics", "bitfieldconsulting.com",
			"Type parameters let us write code that works with many types. … Constraints say which types a parameter accepts.",
			time.Date(2024, 1, 8, 9, 15, 27, 0, time.UTC)},
		{"proposal: spec: add generic programming using type parameters · Issue #43651 · golang/go", "https://github.com/golang/go/issues/43651", "github.com",
			"We propose adding support for type parameters to Go. This change will permit writing generic functions and types that work with any type.",
			time.Time{}},
		{"Go Generics 101", "https://go101.org/generics/101.html", "go101.org",
			"Go Generics 101 is a book focusing on the custom generics feature in Go.",
			time.Date(2025, 2, 11, 6, 41, 3, 0, time.UTC)},
	}
	if len(res.Hits) != len(want) {
		t.Fatalf("hits = %d, want %d", len(res.Hits), len(want))
	}
	for i, w := range want {
		h := res.Hits[i]
		if h.Title != w.title || h.URL != w.url || h.Source != w.source {
			t.Errorf("hit %d = %q %q %q, want %q %q %q", i+1, h.Title, h.URL, h.Source, w.title, w.url, w.source)
		}
		if w.snippet != "" && h.Snippet != w.snippet {
			t.Errorf("hit %d snippet = %q\nwant %q", i+1, h.Snippet, w.snippet)
		}
		if i != 2 && !h.Published.Equal(w.published) {
			t.Errorf("hit %d published = %v, want %v", i+1, h.Published, w.published)
		}
	}
	// "age": "3 days ago" with no page_age.
	if got, lo, hi := res.Hits[2].Published, before.Add(-72*time.Hour-time.Second), time.Now().Add(-72*time.Hour+time.Second); got.Before(lo) || got.After(hi) {
		t.Errorf("relative age: published %v, want about 3 days ago", got)
	}
	if res.Usage.CostUSD != 0.005 {
		t.Errorf("cost = %v", res.Usage.CostUSD)
	}
}

// A Chinese and emoji result comes through intact; its long description is cut on a
// rune boundary within SnippetBudget, and the model reads exactly that cut.
func TestBraveUnicode(t *testing.T) {
	t.Parallel()
	res, _ := enginetest.Search(t, engines.Config{Kind: "brave"}, engines.Query{Query: "Go 泛型 教程 🚀"}, enginetest.JSON(braveWeb))
	var raw struct {
		Web struct {
			Results []struct{ Description string } `json:"results"`
		} `json:"web"`
	}
	if err := json.Unmarshal(fixtures.Read(braveWeb), &raw); err != nil {
		t.Fatal(err)
	}
	full := strings.NewReplacer("<strong>", "", "</strong>", "").Replace(raw.Web.Results[2].Description)
	h := res.Hits[2]
	if h.Title != "Go 语言泛型入门教程 🚀 | 菜鸟教程" {
		t.Errorf("title = %q", h.Title)
	}
	classicCheckClipped(t, res, h, full)
}

func TestBraveErrors(t *testing.T) {
	t.Parallel()
	q := engines.Query{Query: "go generics"}
	reset := http.Header{"X-Ratelimit-Reset": {"1, 1419704"}, "X-Ratelimit-Remaining": {"0, 14973"}}
	for _, tc := range []struct {
		name   string
		resp   enginetest.Response
		kind   engines.ErrorKind
		status int
		msg    string
		retry  time.Duration
	}{
		{"recorded 402 usage limit", enginetest.Status(402, "brave/logged-402-usage-limit-exceeded.json"), engines.Quota, 402, "Usage limit exceeded.", 0},
		{"422 invalid token", enginetest.Status(422, "brave/docs-shape-422-subscription-token-invalid.CONSTRUCTED.json"), engines.Auth, 422, "The provided subscription token is invalid.", 0},
		{"429 quota limited", enginetest.Status(429, "brave/docs-shape-429-quota-limited.CONSTRUCTED.json"), engines.Quota, 429, "Request quota limit exceeded for plan.", 0},
		{"429 rate limited, X-RateLimit-Reset", enginetest.Response{Status: 429, Header: reset, Body: fixtures.Read("brave/docs-shape-429-rate-limited.CONSTRUCTED.json")}, engines.RateLimited, 429, "Request rate limit exceeded for plan.", time.Second},
		{"429 Retry-After wins", enginetest.Response{Status: 429, Header: http.Header{"Retry-After": {"3"}, "X-Ratelimit-Reset": {"1, 1419704"}}, Body: fixtures.Read("brave/docs-shape-429-rate-limited.CONSTRUCTED.json")}, engines.RateLimited, 429, "RATE_LIMITED", 3 * time.Second},
		{"422 validation stays a bad request", enginetest.Status(422, `{"type":"ErrorResponse","error":{"id":"1","status":422,"code":"VALIDATION","detail":"Unable to validate request parameter(s)","meta":{"errors":[{"loc":["query","count"],"msg":"ensure this value is less than or equal to 20"}]}}}`), engines.BadRequest, 422, "VALIDATION", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err, _ := enginetest.Do(t, engines.Config{Kind: "brave"}, q, tc.resp)
			e := classicWantError(t, err, tc.kind, tc.msg)
			if e.Status != tc.status || e.RetryAfter != tc.retry {
				t.Errorf("status %d retry %s, want %d %s", e.Status, e.RetryAfter, tc.status, tc.retry)
			}
		})
	}
}

// Every filter is sent to Brave: domains as site: operators, recency as freshness,
// count (capped at 20, with a warning), language and country. What Brave cannot take
// (an unknown language or country, hits outside the domains) is warned about.
func TestBraveFiltersOnTheWire(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "brave"}, engines.Query{
		Query:          "go generics",
		Recency:        engines.OneWeek,
		Count:          30,
		AllowedDomains: []string{"go.dev", "https://www.GitHub.com/"},
		BlockedDomains: []string{"runoob.com"},
		Language:       "zh-CN",
		Country:        "us",
	}, enginetest.JSON(braveWeb))
	if len(reqs) != 1 || reqs[0].Method != http.MethodGet {
		t.Fatalf("requests = %+v", reqs)
	}
	u, err := url.Parse(reqs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != "/res/v1/web/search" {
		t.Errorf("path = %q", u.Path)
	}
	for k, want := range map[string]string{
		"q":           "go generics (site:go.dev OR site:github.com) -site:runoob.com",
		"freshness":   "pw",
		"count":       "20",
		"search_lang": "zh-hans",
		"country":     "US",
		// Only the section parse reads.
		"result_filter": "web",
	} {
		if got := u.Query().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if reqs[0].Header.Get("X-Subscription-Token") != "sk-test-key" || reqs[0].Header.Get("Accept") != "application/json" {
		t.Errorf("headers = %v", reqs[0].Header)
	}
	// The fixture ignores the operators: the off-domain hits are dropped here.
	if len(res.Hits) != 3 {
		t.Errorf("hits = %d, want the 3 on go.dev and github.com", len(res.Hits))
	}
	for _, h := range res.Hits {
		if p, _ := url.Parse(h.URL); p == nil || p.Host != "go.dev" && p.Host != "github.com" {
			t.Errorf("hit %q is outside the allowed domains", h.URL)
		}
	}
	classicWantWarning(t, res, "at most 20 results")
	classicWantWarning(t, res, "3 hit(s) outside the domain filters")

	res, reqs = enginetest.Search(t, engines.Config{Kind: "brave"}, engines.Query{Query: "go", AllowedDomains: []string{"go.dev"}, Language: "xx", Country: "ZZ"}, enginetest.JSON(braveWeb))
	u, _ = url.Parse(reqs[0].Path)
	if q := u.Query(); q.Get("q") != "go site:go.dev" || q.Has("search_lang") || q.Has("country") || q.Has("freshness") || q.Get("count") != "10" {
		t.Errorf("query = %v", q)
	}
	classicWantWarning(t, res, `language "xx" is not one Brave knows`)
	classicWantWarning(t, res, `country "ZZ" is not one Brave knows`)
}

// classicWantError asserts err is an *engines.Error of kind whose message contains msg.
func classicWantError(t *testing.T, err error, kind engines.ErrorKind, msg string) *engines.Error {
	t.Helper()
	var e *engines.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *engines.Error", err, err)
	}
	if e.Kind != kind || !strings.Contains(e.Message, msg) {
		t.Fatalf("error = %s %q, want %s containing %q", e.Kind, e.Message, kind, msg)
	}
	return e
}

// classicWantWarning asserts one of res's warnings contains s.
func classicWantWarning(t *testing.T, res *engines.Result, s string) {
	t.Helper()
	for _, w := range res.Warnings {
		if strings.Contains(w, s) {
			return
		}
	}
	t.Errorf("no warning contains %q; warnings: %q", s, res.Warnings)
}

// classicCheckClipped asserts a hit's snippet is full cut on a rune boundary within
// SnippetBudget, marked with "…", and that the model reads it whole.
func classicCheckClipped(t *testing.T, res *engines.Result, h engines.Hit, full string) {
	t.Helper()
	if len(full) <= engines.SnippetBudget {
		t.Fatalf("fixture text is only %d bytes; it must exceed SnippetBudget to test the cut", len(full))
	}
	if !utf8.ValidString(h.Snippet) || len(h.Snippet) > engines.SnippetBudget || !strings.HasSuffix(h.Snippet, "…") {
		t.Errorf("snippet (%d bytes, valid UTF-8 %v) = %q", len(h.Snippet), utf8.ValidString(h.Snippet), h.Snippet)
	}
	cut := strings.TrimSuffix(h.Snippet, "…")
	if !strings.HasPrefix(full, cut) || len(cut) < engines.SnippetBudget-8 {
		t.Errorf("snippet %q is not a near-budget prefix of %q", cut, full)
	}
	if !strings.Contains(res.Citation.LLMContent, h.Title) || !strings.Contains(res.Citation.LLMContent, "    "+h.Snippet+"\n") {
		t.Errorf("LLMContent does not carry the hit's title and snippet intact:\n%s", res.Citation.LLMContent)
	}
}

// FuzzClassicNormalize feeds arbitrary bodies to the four classic parsers: none may
// panic, and whatever parses keeps its snippets valid UTF-8 within SnippetBudget. Under
// plain go test it runs the seeds: every success fixture and a few odd shapes.
func FuzzClassicNormalize(f *testing.F) {
	for _, seed := range []string{
		braveWeb, searxngSearch, exaSearch, serperSearch, "exa/sdk-spec-search-return-example.json",
	} {
		f.Add(fixtures.Read(seed))
	}
	for _, seed := range []string{
		``, `null`, `[]`, `{}`, `{"web":null}`, `{"web":{"results":[null,{}]}}`, `{"results":[null]}`,
		`{"results":[{"url":"https://a.example/","publishedDate":"99999999999 years ago"}]}`,
		`{"results":[],"unresponsive_engines":[[],[1,2],"x",null]}`,
		`{"organic":[{"link":"https://a.example/","date":"9223372036854775807 hours ago"}],"answerBox":{},"knowledgeGraph":{}}`,
		`{"web":{"results":[{"url":"https://a.example/","description":"<b","age":"-1 days ago"}]}}`,
	} {
		f.Add([]byte(seed))
	}
	cfgs := []engines.Config{{Kind: "brave"}, searxngConfig, {Kind: "exa"}, {Kind: "serper"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, cfg := range cfgs {
			res, err := engines.Normalize(cfg, engines.Query{Query: "fuzz", Recency: engines.OneWeek, AllowedDomains: []string{"example"}}, body)
			if err != nil {
				continue
			}
			for _, h := range res.Hits {
				if !utf8.ValidString(h.Snippet) || len(h.Snippet) > engines.SnippetBudget {
					t.Errorf("%s: snippet %q", cfg.Kind, h.Snippet)
				}
			}
		}
	})
}
