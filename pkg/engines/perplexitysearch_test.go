package engines_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

const perplexitySearchOK = "perplexity/docs-shape-search.CONSTRUCTED.json"

func TestPerplexitySearchConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "perplexity-search"},
		OK:     []enginetest.Response{enginetest.JSON(perplexitySearchOK)},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 3 {
				t.Fatalf("hits = %d, want 3", len(r.Hits))
			}
			if h := r.Hits[0]; h.Title != "Large language model - Wikipedia" || !h.Published.Equal(time.Date(2023, 3, 15, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("hit 1 = %+v", h)
			}
			if h := r.Hits[1]; !strings.HasPrefix(h.Title, "大语言模型") || !h.Published.Equal(time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("hit 2 (date null: last_updated) = %+v", h)
			}
			if r.Usage.CostUSD != 0.005 || r.Usage.Searches != 1 {
				t.Errorf("usage = %+v, want $5 per 1,000 requests", r.Usage)
			}
		},
		Empty:       []enginetest.Response{{Body: []byte(`{"id":"e0","results":[]}`)}},
		RateLimited: enginetest.Status(429, `{"error":{"message":"Rate limit exceeded","type":"rate_limit_exceeded","code":429}}`),
		QueryOf: func(_ *http.Request, body []byte) string {
			var v struct{ Query string }
			json.Unmarshal(body, &v)
			return v.Query
		},
		KeyOf: glmBearerKey,
	})
}

// Every filter is a Search API field.
func TestPerplexitySearchRequest(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "perplexity-search"},
		engines.Query{Query: "llm", Count: 30, Recency: engines.OneMonth, BlockedDomains: []string{"pinterest.com"}, Language: "zh-CN", Country: "cn"},
		enginetest.JSON(perplexitySearchOK))
	if reqs[0].Path != "/search" {
		t.Errorf("path = %q", reqs[0].Path)
	}
	var sent struct {
		Query                string   `json:"query"`
		MaxResults           int      `json:"max_results"`
		SearchDomainFilter   []string `json:"search_domain_filter"`
		SearchRecencyFilter  string   `json:"search_recency_filter"`
		SearchLanguageFilter []string `json:"search_language_filter"`
		Country              string   `json:"country"`
	}
	json.Unmarshal(reqs[0].Body, &sent)
	if sent.Query != "llm" || sent.MaxResults != 20 || !reflect.DeepEqual(sent.SearchDomainFilter, []string{"-pinterest.com"}) ||
		sent.SearchRecencyFilter != "month" || !reflect.DeepEqual(sent.SearchLanguageFilter, []string{"zh"}) || sent.Country != "CN" {
		t.Errorf("sent %+v", sent)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "at most 20") {
		t.Errorf("warnings = %v, want the 20-result ceiling named", res.Warnings)
	}
}
