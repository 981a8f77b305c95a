package engines_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

func TestTavilyConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "tavily"},
		OK:     []enginetest.Response{enginetest.JSON("tavily/pydantic-test_basic_search.response.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 5 {
				t.Fatalf("hits = %d, want 5", len(r.Hits))
			}
			if h := r.Hits[1]; h.Title != "Pydantic AI - Pydantic AI" || h.URL != "https://ai.pydantic.dev/" {
				t.Errorf("hit 2 = %q %q", h.Title, h.URL)
			}
			if !strings.HasPrefix(r.Hits[1].Snippet, "Pydantic AI is a Python agent framework") {
				t.Errorf("snippet = %q", r.Hits[1].Snippet)
			}
			if !strings.Contains(r.Citation.LLMContent, "[2] Pydantic AI - Pydantic AI (https://ai.pydantic.dev/)") {
				t.Errorf("LLMContent lacks numbered source 2:\n%s", r.Citation.LLMContent)
			}
			if r.Usage.CostUSD != 0.008 {
				t.Errorf("cost = %v", r.Usage.CostUSD)
			}
		},
		Empty:       []enginetest.Response{{Body: []byte(`{"query":"q","answer":null,"images":[],"results":[],"response_time":0.5}`)}},
		RateLimited: enginetest.Status(429, `{"detail":{"error":"Your request has been blocked due to excessive requests."}}`),
		AuthError:   enginetest.Status(401, `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`),
		QueryOf: func(_ *http.Request, body []byte) string {
			var v struct{ Query string }
			json.Unmarshal(body, &v)
			return v.Query
		},
		KeyOf: func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") },
	})
}

// The include_domains recording: every hit is on arxiv.org, and the domain filter is
// passed to Tavily rather than applied afterwards (no warning).
func TestTavilyIncludeDomainsFixture(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "tavily"},
		engines.Query{Query: "transformer architectures", AllowedDomains: []string{"arxiv.org"}},
		enginetest.JSON("tavily/pydantic-test_search_with_include_domains.response.json"))
	if len(res.Hits) == 0 {
		t.Fatal("no hits")
	}
	for _, h := range res.Hits {
		if !strings.Contains(h.URL, "arxiv.org") {
			t.Errorf("hit %q is not on arxiv.org", h.URL)
		}
	}
	var sent struct {
		IncludeDomains []string `json:"include_domains"`
	}
	json.Unmarshal(reqs[0].Body, &sent)
	if len(sent.IncludeDomains) != 1 || sent.IncludeDomains[0] != "arxiv.org" {
		t.Errorf("include_domains sent = %v", sent.IncludeDomains)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings = %v, want none (Tavily filters domains natively)", res.Warnings)
	}
}
