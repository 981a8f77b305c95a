package engines_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// budgetCases are the largest success recording (or constructed fixture) of each kind.
var budgetCases = []struct {
	kind  string
	q     engines.Query
	files []string
}{
	{"gemini", engines.Query{Query: "weather in San Francisco"}, []string{"gemini/pydantic-generate-websearch-mexico-2.response.json"}},
	{"openai", engines.Query{Query: "tech news"}, []string{"openai/vercel-responses-web-search-gpt5mini.json"}},
	{"anthropic", engines.Query{Query: "San Francisco today"}, []string{"anthropic/pydantic-pause-turn.0.response.json", "anthropic/pydantic-pause-turn.1-continuation.response.json"}},
	{"glm-chat", engines.Query{Query: "财经事件"}, []string{"zhipu/glm-chat-finance-zh.CONSTRUCTED.json"}},
	{"glm-api", engines.Query{Query: "千问"}, []string{"zhipu/realcase-web-search-api-search-std.response.json"}},
	{"kimi", engines.Query{Query: "kimi k2.6"}, []string{"moonshot/hermoonshotes-round1-tool-calls.response.json", "moonshot/hermoonshotes-round2-final.response.json"}},
	{"perplexity", engines.Query{Query: "San Francisco weather"}, []string{"perplexity/docs-shape-agent-web-search.CONSTRUCTED.json"}},
	{"openrouter", engines.Query{Query: "pydantic ai"}, []string{"openrouter/pydantic-server-tool-web-search-annotations.response.json"}},
	{"tavily", engines.Query{Query: "transformer architectures"}, []string{"tavily/pydantic-test_search_with_include_domains.response.json"}},
	{"brave", engines.Query{Query: "go generics"}, []string{"brave/docs-shape-web-search.CONSTRUCTED.json"}},
	{"searxng", engines.Query{Query: "rust async"}, []string{"searxng/docs-shape-search.CONSTRUCTED.json"}},
	{"exa", engines.Query{Query: "llm agents"}, []string{"exa/docs-shape-search-highlights.CONSTRUCTED.json"}},
	{"serper", engines.Query{Query: "apple"}, []string{"serper/docs-shape-search.CONSTRUCTED.json"}},
}

// perSourceBudget is the documented ceiling for one numbered source in the text the
// main model reads: title + URL + snippet budgets and their framing (see render.go).
const perSourceBudget = engines.TitleBudget + engines.URLBudget + engines.SnippetBudget + 3*4 + 32

// TestLLMContentBudget measures the tool-result text of every kind's largest fixture
// and holds it to the documented budget: header + summary ≤ SummaryBudget + per source
// ≤ perSourceBudget.
func TestLLMContentBudget(t *testing.T) {
	t.Parallel()
	for _, c := range budgetCases {
		t.Run(c.kind, func(t *testing.T) {
			bodies := make([][]byte, len(c.files))
			in := 0
			for i, f := range c.files {
				bodies[i] = fixtures.Read(f)
				in += len(bodies[i])
			}
			cfg := engines.Config{Kind: c.kind}
			if c.kind == "searxng" {
				cfg.BaseURL = "http://searxng.local"
			}
			r, err := engines.Normalize(cfg, c.q, bodies...)
			if err != nil {
				t.Fatal(err)
			}
			n := len(r.Citation.Sources)
			limit := 300 + engines.SummaryBudget + n*perSourceBudget
			got := len(r.Citation.LLMContent)
			t.Logf("%-10s provider body %7d B → LLMContent %5d B, %2d sources, %4d B/source beyond the summary", c.kind, in, got, n, (got-min(len(r.Summary), engines.SummaryBudget))/max(n, 1))
			if got > limit {
				t.Errorf("LLMContent is %d bytes, over the %d-byte budget", got, limit)
			}
			if n == 0 {
				t.Error("no sources")
			}
		})
	}
}

// Gemini's grounding URLs are redirects on vertexaisearch.cloud.google.com; a domain
// filter must judge them by the site the hit names, not the redirector's host.
func TestDomainFilterSeesThroughRedirects(t *testing.T) {
	t.Parallel()
	body := fixtures.Read("gemini/pydantic-generate-websearch-sf.response.json")
	all, err := engines.Normalize(engines.Config{Kind: "gemini"}, engines.Query{Query: "weather in San Francisco"}, body)
	if err != nil {
		t.Fatal(err)
	}
	r, err := engines.Normalize(engines.Config{Kind: "gemini"}, engines.Query{Query: "weather in San Francisco", AllowedDomains: []string{"weather.gov"}}, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hits) == 0 || len(r.Hits) >= len(all.Hits) {
		t.Fatalf("allowed weather.gov kept %d of %d hits", len(r.Hits), len(all.Hits))
	}
	for _, h := range r.Hits {
		if h.Source != "weather.gov" {
			t.Errorf("kept a hit from %q", h.Source)
		}
		if !strings.Contains(h.URL, "vertexaisearch.cloud.google.com") {
			t.Errorf("hit URL %q is not the redirect", h.URL)
		}
	}
	blocked, err := engines.Normalize(engines.Config{Kind: "gemini"}, engines.Query{Query: "weather in San Francisco", BlockedDomains: []string{"weather.gov"}}, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked.Hits)+len(r.Hits) != len(all.Hits) {
		t.Errorf("blocked kept %d, allowed kept %d, of %d", len(blocked.Hits), len(r.Hits), len(all.Hits))
	}
}

// SearchStructured is Search without the model's text, which Render then gives as
// Search does: a caller that renders the text itself does not pay for it twice.
func TestSearchStructuredLeavesTheTextToRender(t *testing.T) {
	t.Parallel()
	body := fixtures.Read(braveWeb)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	reg, err := engines.FromConfig([]engines.Config{{ID: "brave", Kind: "brave", APIKey: "k", BaseURL: srv.URL}}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Get("brave")
	q := engines.Query{Query: "go generics"}
	full, err := e.Search(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := engines.SearchStructured(t.Context(), e, q)
	if err != nil {
		t.Fatal(err)
	}
	if full.Citation.LLMContent == "" || bare.Citation.LLMContent != "" {
		t.Fatalf("LLMContent: Search %d bytes, SearchStructured %q", len(full.Citation.LLMContent), bare.Citation.LLMContent)
	}
	engines.Render(bare)
	if bare.Citation.LLMContent != full.Citation.LLMContent {
		t.Errorf("rendered afterwards:\n%s\nrendered by Search:\n%s", bare.Citation.LLMContent, full.Citation.LLMContent)
	}
}
