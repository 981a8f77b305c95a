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

// jsonQuery returns a QueryOf that reads the JSON field key of a request body.
func jsonQuery(key string) func(*http.Request, []byte) string {
	return func(_ *http.Request, body []byte) string {
		var v map[string]any
		json.Unmarshal(body, &v)
		s, _ := v[key].(string)
		return s
	}
}

var cloudflareConfig = engines.Config{Kind: "cloudflare", Options: json.RawMessage(`{"accountId":"acct-0123"}`)}

func TestCloudflareConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: cloudflareConfig,
		OK:     []enginetest.Response{enginetest.JSON("cloudflare/docs-shape-websearch.CONSTRUCTED.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 3 {
				t.Fatalf("hits = %d, want 3", len(r.Hits))
			}
			if h := r.Hits[2]; !strings.HasPrefix(h.Title, "Les meilleures randonnées") || !strings.HasPrefix(h.Snippet, "Lacs de montagne, érables") {
				t.Errorf("hit 3 = %+v", h)
			}
			if r.Usage.CostUSD != 0.00025 {
				t.Errorf("cost = %v, want Ceramic's $0.25 per 1,000", r.Usage.CostUSD)
			}
		},
		Empty:     []enginetest.Response{{Body: []byte(`{"success":true,"errors":[],"messages":[],"result":{"results":[]}}`)}},
		AuthError: enginetest.Status(401, "cloudflare/docs-shape-401-authentication-error.CONSTRUCTED.json"),
		QueryOf:   jsonQuery("query"),
		KeyOf:     glmBearerKey,
	})
}

func TestCloudflareRequest(t *testing.T) {
	t.Parallel()
	cfg := cloudflareConfig
	cfg.Options = json.RawMessage(`{"accountId":"acct-0123","provider":"exa","gateway":"gw1"}`)
	res, reqs := enginetest.Search(t, cfg, engines.Query{Query: "fall hikes", Count: 30, AllowedDomains: []string{"visitsaltlake.com"}},
		enginetest.JSON("cloudflare/docs-shape-websearch.CONSTRUCTED.json"))
	if reqs[0].Path != "/client/v4/accounts/acct-0123/ai/websearch/" {
		t.Errorf("path = %q", reqs[0].Path)
	}
	var sent struct {
		Query, Provider string
		Limit           int
		Options         struct{ Gateway struct{ ID string } }
	}
	json.Unmarshal(reqs[0].Body, &sent)
	if sent.Query != "fall hikes" || sent.Provider != "exa" || sent.Limit != 20 || sent.Options.Gateway.ID != "gw1" {
		t.Errorf("sent %+v", sent)
	}
	// The API takes no domain filter: the fleet keeps only the allowed domain's hits.
	if len(res.Hits) != 1 || res.Usage.CostUSD != 0.007 {
		t.Errorf("hits = %d, cost = %v", len(res.Hits), res.Usage.CostUSD)
	}
	for _, bad := range []string{`{}`, `{"accountId":"a","provider":"bing"}`} {
		if _, err := engines.FromConfig([]engines.Config{{ID: "cf", Kind: "cloudflare", Options: json.RawMessage(bad)}}, nil); err == nil {
			t.Errorf("options %s accepted", bad)
		}
	}
}

func TestParallelConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "parallel"},
		OK:     []enginetest.Response{enginetest.JSON("parallel/docs-shape-search.CONSTRUCTED.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 3 {
				t.Fatalf("hits = %d, want 3", len(r.Hits))
			}
			if h := r.Hits[0]; !h.Published.Equal(time.Date(2026, 10, 14, 0, 0, 0, 0, time.UTC)) || !strings.Contains(h.Snippet, " … Toyota and Idemitsu") {
				t.Errorf("hit 1 = %+v", h)
			}
			if h := r.Hits[2]; !strings.HasPrefix(h.Title, "全固体電池") {
				t.Errorf("hit 3 = %+v", h)
			}
			if r.Usage.CostUSD != 0.001 {
				t.Errorf("cost = %v, want $1 per 1,000 in fast mode", r.Usage.CostUSD)
			}
		},
		Empty: []enginetest.Response{{Body: []byte(`{"search_id":"search_0","results":[]}`)}},
		QueryOf: func(_ *http.Request, body []byte) string {
			var v struct {
				SearchQueries []string `json:"search_queries"`
			}
			json.Unmarshal(body, &v)
			return strings.Join(v.SearchQueries, " ")
		},
		KeyOf: func(r *http.Request) string { return r.Header.Get("x-api-key") },
	})
}

func TestParallelRequest(t *testing.T) {
	t.Parallel()
	_, reqs := enginetest.Search(t, engines.Config{Kind: "parallel", Options: json.RawMessage(`{"mode":"turbo"}`)},
		engines.Query{Query: "solid state batteries", Count: 7, Recency: engines.OneWeek, BlockedDomains: []string{"reddit.com"}},
		enginetest.JSON("parallel/docs-shape-search.CONSTRUCTED.json"))
	var sent struct {
		Objective        string   `json:"objective"`
		SearchQueries    []string `json:"search_queries"`
		Mode             string   `json:"mode"`
		AdvancedSettings struct {
			MaxResults   int `json:"max_results"`
			SourcePolicy struct {
				ExcludeDomains []string `json:"exclude_domains"`
				AfterDate      string   `json:"after_date"`
			} `json:"source_policy"`
		} `json:"advanced_settings"`
	}
	json.Unmarshal(reqs[0].Body, &sent)
	week := time.Now().Add(-7 * 24 * time.Hour).UTC().Format(time.DateOnly)
	if reqs[0].Path != "/v1/search" || sent.Mode != "turbo" || sent.Objective != "solid state batteries" || len(sent.SearchQueries) != 1 ||
		sent.AdvancedSettings.MaxResults != 7 || !reflect.DeepEqual(sent.AdvancedSettings.SourcePolicy.ExcludeDomains, []string{"reddit.com"}) ||
		sent.AdvancedSettings.SourcePolicy.AfterDate != week {
		t.Errorf("sent %s %+v", reqs[0].Path, sent)
	}
}

func TestLinkupConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "linkup"},
		OK:     []enginetest.Response{enginetest.JSON("linkup/docs-shape-search-results.CONSTRUCTED.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 3 {
				t.Fatalf("hits = %d, want 3 (the image result skipped)", len(r.Hits))
			}
			if h := r.Hits[1]; h.Title != "Anne L'Huillier – Wikipédia" || !strings.Contains(h.Snippet, "lauréate du prix Nobel") {
				t.Errorf("hit 2 = %+v", h)
			}
			if r.Usage.CostUSD != 0.005 {
				t.Errorf("cost = %v, want €0.005 at usdPerEUR 1", r.Usage.CostUSD)
			}
		},
		Empty:     []enginetest.Response{{Body: []byte(`{"results":[]}`)}},
		AuthError: enginetest.Status(401, "linkup/docs-shape-401-unauthorized.CONSTRUCTED.json"),
		QueryOf:   jsonQuery("q"),
		KeyOf:     glmBearerKey,
	})
}

func TestLinkupRequest(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "linkup", Options: json.RawMessage(`{"depth":"deep","usdPerEUR":1.1}`)},
		engines.Query{Query: "women nobel physics", Count: 4, Recency: engines.OneYear, AllowedDomains: []string{"nobelprize.org"}},
		enginetest.JSON("linkup/docs-shape-search-results.CONSTRUCTED.json"))
	var sent map[string]any
	json.Unmarshal(reqs[0].Body, &sent)
	year := time.Now().Add(-366 * 24 * time.Hour).UTC().Format(time.DateOnly)
	if reqs[0].Path != "/v1/search" || sent["q"] != "women nobel physics" || sent["depth"] != "deep" || sent["outputType"] != "searchResults" ||
		sent["maxResults"] != 4.0 || sent["fromDate"] != year || !reflect.DeepEqual(sent["includeDomains"], []any{"nobelprize.org"}) {
		t.Errorf("sent %v", sent)
	}
	if c := res.Usage.CostUSD; c < 0.0549 || c > 0.0551 {
		t.Errorf("cost = %v, want €0.05 × 1.1", c)
	}
	if _, err := engines.FromConfig([]engines.Config{{ID: "l", Kind: "linkup", Options: json.RawMessage(`{"depth":"sourcedAnswer"}`)}}, nil); err == nil {
		t.Error("an unknown depth was accepted")
	}
}
