package engines_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

func TestGLMAPIConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "glm-api"},
		OK:     []enginetest.Response{enginetest.JSON("zhipu/realcase-web-search-api-search-std.response.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			// Three results, the second with empty link/icon/media: dropped.
			if len(r.Hits) != 2 {
				t.Fatalf("hits = %d, want 2", len(r.Hits))
			}
			h := r.Hits[0]
			if h.Title != "阿里正式发布！千问最强模型来了" || h.URL != "https://finance.eastmoney.com/a/202601273631484126.html" || h.Source != "东方财富网" {
				t.Errorf("hit 1 = %q %q %q", h.Title, h.URL, h.Source)
			}
			if want := time.Date(2026, 1, 27, 2, 31, 42, 0, time.UTC); !h.Published.Equal(want) {
				t.Errorf("published = %v, want %v", h.Published, want)
			}
			if !strings.HasPrefix(h.Snippet, "数据是个宝 数据宝 投资少烦恼") {
				t.Errorf("snippet = %q", h.Snippet)
			}
			if want := time.Date(2026, 1, 27, 16, 18, 0, 0, time.UTC); r.Hits[1].Title != "阿里千问最强模型Qwen3-Max-Thinking正式发布" || !r.Hits[1].Published.Equal(want) {
				t.Errorf("hit 2 = %q %v", r.Hits[1].Title, r.Hits[1].Published)
			}
			if r.Summary != "" {
				t.Errorf("summary = %q, want none", r.Summary)
			}
			if !strings.Contains(r.Citation.LLMContent, "[2] 阿里千问最强模型Qwen3-Max-Thinking正式发布 (https://www.sohu.com/a/980761795_114774)") {
				t.Errorf("LLMContent:\n%s", r.Citation.LLMContent)
			}
			if !glmNear(r.Usage.CostUSD, 0.01*0.14) || r.Usage.Searches != 1 {
				t.Errorf("usage = %+v, want search_std ¥0.01", r.Usage)
			}
			if !strings.Contains(strings.Join(r.Warnings, "\n"), "1 hit(s) without an absolute http(s) URL were dropped") {
				t.Errorf("warnings = %q", r.Warnings)
			}
		},
		Empty:       []enginetest.Response{{Body: []byte(`{"created":1770732262,"id":"2026021022042287a171dca3ec4f15","request_id":"2026021022042287a171dca3ec4f15","search_intent":[{"intent":"SEARCH_NONE","keywords":"","query":"q"}],"search_result":[]}`)}},
		RateLimited: enginetest.Response{Status: 429, Body: glmErrorFixture(t, "rate_limit_429")},
		QueryOf: func(_ *http.Request, body []byte) string {
			var v struct {
				SearchQuery string `json:"search_query"`
			}
			json.Unmarshal(body, &v)
			return v.SearchQuery
		},
		KeyOf: glmBearerKey,
	})
}

// The real request: same query and options give the same body, key for key.
func TestGLMAPIRealRequest(t *testing.T) {
	t.Parallel()
	var rec map[string]any
	if err := json.Unmarshal(fixtures.Read("zhipu/realcase-web-search-api-search-std.request.json"), &rec); err != nil {
		t.Fatal(err)
	}
	_, reqs := enginetest.Search(t, engines.Config{Kind: "glm-api", Options: json.RawMessage(`{"searchEngine":"search_std","contentSize":"medium"}`)},
		engines.Query{Query: "千问"}, enginetest.JSON("zhipu/realcase-web-search-api-search-std.response.json"))
	if reqs[0].Path != "/web_search" {
		t.Errorf("path = %q", reqs[0].Path)
	}
	var sent map[string]any
	json.Unmarshal(reqs[0].Body, &sent)
	if !reflect.DeepEqual(sent, rec) {
		t.Errorf("sent %v\nrecorded %v", sent, rec)
	}
}

// The docs example: request fields as documented, and its one result parsed.
func TestGLMAPIDocsExample(t *testing.T) {
	t.Parallel()
	var rec map[string]any
	json.Unmarshal(fixtures.Read("zhipu/docs-web-search-api.request.json"), &rec)
	res, reqs := enginetest.Search(t, engines.Config{Kind: "glm-api", Options: json.RawMessage(`{"searchEngine":"search_pro","contentSize":"high"}`)},
		engines.Query{Query: rec["search_query"].(string), Count: 15, AllowedDomains: []string{rec["search_domain_filter"].(string)}},
		enginetest.JSON("zhipu/docs-web-search-api.response.json"))
	var sent map[string]any
	json.Unmarshal(reqs[0].Body, &sent)
	rec["search_domain_filter"] = "sohu.com" // query domains are normalized without "www."
	for k, v := range rec {
		if sent[k] != v {
			t.Errorf("%s = %#v, want %#v", k, sent[k], v)
		}
	}
	if sent["search_intent"] != false {
		t.Errorf("search_intent = %#v, want false", sent["search_intent"])
	}
	if len(res.Hits) != 1 {
		t.Fatalf("hits = %d", len(res.Hits))
	}
	h := res.Hits[0]
	if h.Title != "2025年5月23日财经早资讯" || h.URL != "https://www.sohu.com/a/897879632_121123890" || h.Source != "搜狐" ||
		!h.Published.Equal(time.Date(2025, 5, 23, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("hit = %+v", h)
	}
	if !glmNear(res.Usage.CostUSD, 0.03*0.14) {
		t.Errorf("cost = %v", res.Usage.CostUSD)
	}
}

// A query over 70 characters is cut on a character boundary, and the caller is told.
func TestGLMAPILongQuery(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("千问模型", 20) // 80 characters, 240 bytes
	res, reqs := enginetest.Search(t, engines.Config{Kind: "glm-api"}, engines.Query{Query: long},
		enginetest.JSON("zhipu/realcase-web-search-api-search-std.response.json"))
	var sent struct {
		SearchQuery string `json:"search_query"`
	}
	json.Unmarshal(reqs[0].Body, &sent)
	if n := utf8.RuneCountInString(sent.SearchQuery); n != 70 || !utf8.ValidString(sent.SearchQuery) || !strings.HasPrefix(long, sent.SearchQuery) {
		t.Errorf("search_query = %q (%d characters)", sent.SearchQuery, n)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "at most 70 characters: the query (80) was cut") {
		t.Errorf("warnings = %q", res.Warnings)
	}
}
