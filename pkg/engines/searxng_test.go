package engines_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

const searxngSearch = "searxng/docs-shape-search.CONSTRUCTED.json"

// searxngConfig is a SearXNG engine; the base URL is replaced by the test server's.
var searxngConfig = engines.Config{Kind: "searxng", BaseURL: "http://searxng.invalid"}

// nginxAuth is what an authenticating proxy in front of an instance answers.
const nginxAuth = "<html>\r\n<head><title>401 Authorization Required</title></head>\r\n<body>\r\n<center><h1>401 Authorization Required</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

func TestSearXNGConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: searxngConfig,
		NoKey:  true,
		OK:     []enginetest.Response{enginetest.JSON(searxngSearch)},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 5 {
				t.Fatalf("hits = %d, want 5", len(r.Hits))
			}
			if h := r.Hits[0]; h.Title != "Tokio - An asynchronous Rust runtime" || h.URL != "https://tokio.rs/" || !h.Published.IsZero() {
				t.Errorf("hit 1 = %q %q %v", h.Title, h.URL, h.Published)
			}
			if !strings.Contains(r.Citation.LLMContent, "[2] Asynchronous Programming in Rust (https://rust-lang.github.io/async-book/)") {
				t.Errorf("LLMContent lacks numbered source 2:\n%s", r.Citation.LLMContent)
			}
			if r.Usage.CostUSD != 0 || r.Usage.Searches != 1 {
				t.Errorf("usage = %+v", r.Usage)
			}
			classicWantWarning(t, r, "wikidata (timeout)")
			// SearXNG has no count parameter: the 6 hits are cut to the 5 asked for
			// afterwards, which needs no warning.
			if len(r.Hits) != 5 || len(r.Warnings) != 1 {
				t.Errorf("hits = %d, warnings = %q; want 5 hits and only the unresponsive-engine warning", len(r.Hits), r.Warnings)
			}
		},
		Empty:          []enginetest.Response{{Body: []byte(`{"query":"zzqx","number_of_results":0,"results":[],"answers":[],"corrections":[],"infoboxes":[],"suggestions":[],"unresponsive_engines":[]}`)}},
		RateLimited:    enginetest.Response{Status: http.StatusTooManyRequests, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("Too Many Requests")},
		WantRetryAfter: 0, // the suite's Retry-After is not added when a header is set
		ServerError:    enginetest.Response{Status: 500, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte("<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n<h1>Internal Server Error</h1>\n")},
		AuthError:      enginetest.Response{Status: 401, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte(nginxAuth)},
		QueryOf:        func(r *http.Request, _ []byte) string { return r.URL.Query().Get("q") },
	})
}

func TestSearXNGSearchFixture(t *testing.T) {
	t.Parallel()
	res, err := engines.Normalize(searxngConfig, engines.Query{Query: "rust async runtime"}, fixtures.Read(searxngSearch))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	want := []struct {
		title, url, source, snippet string
		published                   time.Time
	}{
		{"Tokio - An asynchronous Rust runtime", "https://tokio.rs/", "tokio.rs",
			"Tokio is an asynchronous runtime for the Rust programming language. It provides the building blocks needed for writing network applications.", time.Time{}},
		{"Asynchronous Programming in Rust", "https://rust-lang.github.io/async-book/", "rust-lang.github.io",
			"Getting Started. Welcome to Asynchronous Programming in Rust! If you're looking to start writing asynchronous Rust code, you've come to the right place.",
			time.Date(2024, 11, 2, 0, 0, 0, 0, time.UTC)},
		{"Rust 异步运行时对比：Tokio、async-std 与 smol 🦀", "https://zhuanlan.zhihu.com/p/634517624", "zhuanlan.zhihu.com", "",
			time.Date(2025, 1, 15, 8, 30, 0, 123000000, time.UTC)},
		{"GitHub - smol-rs/smol: A small and fast async runtime for Rust", "https://github.com/smol-rs/smol", "github.com",
			"A small and fast async runtime. This crate simply re-exports other smaller async crates (see the source).", time.Time{}},
		{"async_std - Rust", "https://docs.rs/async-std/latest/async_std/", "docs.rs",
			"Async version of the Rust standard library. async-std is a foundation of portable Rust software, a set of minimal and battle-tested shared abstractions.",
			time.Date(2023, 9, 24, 17, 2, 11, 0, time.UTC)},
		{"Why async Rust?", "https://without.boats/blog/why-async-rust/", "without.boats",
			"Async/await syntax in Rust was initially released to much fanfare and excitement.", time.Date(2023, 10, 15, 0, 0, 0, 0, time.UTC)},
	}
	if len(res.Hits) != len(want) {
		t.Fatalf("hits = %d, want %d", len(res.Hits), len(want))
	}
	for i, w := range want {
		h := res.Hits[i]
		if h.Title != w.title || h.URL != w.url || h.Source != w.source || !h.Published.Equal(w.published) {
			t.Errorf("hit %d = %q %q %q %v\nwant %q %q %q %v", i+1, h.Title, h.URL, h.Source, h.Published, w.title, w.url, w.source, w.published)
		}
		if w.snippet != "" && h.Snippet != w.snippet {
			t.Errorf("hit %d snippet = %q\nwant %q", i+1, h.Snippet, w.snippet)
		}
	}
	if len(res.Warnings) != 1 || res.Warnings[0] != "SearXNG engines that did not answer: wikidata (timeout)" {
		t.Errorf("warnings = %q", res.Warnings)
	}
}

func TestSearXNGUnicode(t *testing.T) {
	t.Parallel()
	res, _ := enginetest.Search(t, searxngConfig, engines.Query{Query: "Rust 异步运行时 🦀"}, enginetest.JSON(searxngSearch))
	var raw struct {
		Results []struct{ Content string } `json:"results"`
	}
	if err := json.Unmarshal(fixtures.Read(searxngSearch), &raw); err != nil {
		t.Fatal(err)
	}
	h := res.Hits[2]
	if h.Title != "Rust 异步运行时对比：Tokio、async-std 与 smol 🦀" {
		t.Errorf("title = %q", h.Title)
	}
	classicCheckClipped(t, res, h, raw.Results[2].Content)
}

// Zero results while engines are unresponsive is an outage, not an empty result.
func TestSearXNGOutage(t *testing.T) {
	t.Parallel()
	_, err, _ := enginetest.Do(t, searxngConfig, engines.Query{Query: "rust async runtime"}, enginetest.JSON("searxng/docs-shape-outage.CONSTRUCTED.json"))
	e := classicWantError(t, err, engines.Unavailable, "brave (Suspended: too many requests), duckduckgo (CAPTCHA), google (timeout)")
	if !e.Retryable() || e.Engine != "under-test" {
		t.Errorf("error = %+v", e)
	}
}

// SearXNG's own 403 (json not in search.formats) tells the operator what to change; a
// proxy's 403 stays an auth failure.
func TestSearXNGFormatDisabled(t *testing.T) {
	t.Parallel()
	q := engines.Query{Query: "rust"}
	page := enginetest.Response{Status: 403, Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}, Body: fixtures.Read("searxng/docs-shape-403-format-disabled.CONSTRUCTED.html")}
	for _, resp := range []enginetest.Response{page, {Status: 403, Header: http.Header{"Content-Type": {"text/plain"}}}} {
		_, err, _ := enginetest.Do(t, searxngConfig, q, resp)
		e := classicWantError(t, err, engines.BadRequest, `adding "json" to search.formats in its settings.yml`)
		if e.Status != 403 || e.Retryable() {
			t.Errorf("error = %+v", e)
		}
	}
	_, err, _ := enginetest.Do(t, searxngConfig, q, enginetest.Response{Status: 403, Body: []byte(`{"error":"forbidden by proxy policy"}`)})
	classicWantError(t, err, engines.Auth, "or an authenticating proxy in front of it, refused access")
}

// Recency and language go on the wire; count, domains and country cannot, and are
// applied afterwards or warned about. oneWeek searches the month and filters here.
func TestSearXNGFiltersOnTheWire(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, searxngConfig, engines.Query{
		Query:          "rust async runtime",
		Recency:        engines.OneWeek,
		Count:          3,
		AllowedDomains: []string{"github.com", "tokio.rs"},
		Language:       "zh-CN",
		Country:        "CN",
	}, enginetest.JSON(searxngSearch))
	u, err := url.Parse(reqs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != "/search" || reqs[0].Method != http.MethodGet {
		t.Errorf("request = %s %s", reqs[0].Method, u.Path)
	}
	want := url.Values{
		"q": {"rust async runtime"}, "format": {"json"}, "categories": {"general"},
		"language": {"zh-CN"}, "time_range": {"month"}, "pageno": {"1"},
	}
	if got := u.Query(); got.Encode() != want.Encode() {
		t.Errorf("query = %s\nwant    %s", got.Encode(), want.Encode())
	}
	// Every dated hit of the fixture is older than a week; the two undated ones are
	// kept, and both are on the allowed domains.
	if len(res.Hits) != 2 || res.Hits[0].URL != "https://tokio.rs/" || res.Hits[1].URL != "https://github.com/smol-rs/smol" {
		t.Errorf("hits = %+v", res.Hits)
	}
	classicWantWarning(t, res, "dropped 4 dated hit(s) older than a week")
	classicWantWarning(t, res, "and were applied to its results afterwards")
	classicWantWarning(t, res, `country "CN" is not supported`)

	_, reqs = enginetest.Search(t, searxngConfig, engines.Query{Query: "rust", Recency: engines.OneDay}, enginetest.JSON(searxngSearch))
	u, _ = url.Parse(reqs[0].Path)
	if u.Query().Get("time_range") != "day" || u.Query().Has("language") {
		t.Errorf("query = %s", u.RawQuery)
	}
}

func TestSearXNGConfig(t *testing.T) {
	t.Parallel()
	if _, err := engines.FromConfig([]engines.Config{{ID: "sx", Kind: "searxng"}}, nil); err == nil || !strings.Contains(err.Error(), "baseURL") {
		t.Errorf("no baseURL: err = %v", err)
	}
	cfg := searxngConfig
	cfg.Options = json.RawMessage(`{"username":"alice","categories":"it","engines":"github,duckduckgo"}`)
	_, reqs := enginetest.Search(t, cfg, engines.Query{Query: "smol"}, enginetest.JSON(searxngSearch))
	if got, want := reqs[0].Header.Get("Authorization"), "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:sk-test-key")); got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
	u, _ := url.Parse(reqs[0].Path)
	if u.Query().Get("categories") != "it" || u.Query().Get("engines") != "github,duckduckgo" {
		t.Errorf("query = %s", u.RawQuery)
	}
	_, reqs = enginetest.Search(t, searxngConfig, engines.Query{Query: "smol"}, enginetest.JSON(searxngSearch))
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-test-key" {
		t.Errorf("Authorization = %q, want the key as a bearer token", got)
	}
}
