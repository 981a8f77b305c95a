package engines_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

const perplexityAgent = "perplexity/docs-shape-agent-web-search.CONSTRUCTED.json"

// perplexityInput is the query of an Agent API request: its input.
func perplexityInput(_ *http.Request, body []byte) string {
	var v struct{ Input string }
	json.Unmarshal(body, &v)
	return v.Input
}

func TestPerplexityAgentConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "perplexity"},
		OK:     []enginetest.Response{enginetest.JSON(perplexityAgent)},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Citation.Sources) != 3 {
				t.Fatalf("sources = %d, want 3", len(r.Citation.Sources))
			}
			if s := r.Citation.Sources[1].Web; s.Title != "San Francisco Weather - National Weather Service" {
				t.Errorf("source 2 = %+v", s)
			}
			if h := r.Hits[0]; !h.Published.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) || !strings.HasPrefix(h.Snippet, "Today: partly cloudy") {
				t.Errorf("hit 1 = %+v", h)
			}
			if u := r.Usage; u.InputTokens != 1843 || u.OutputTokens != 41 || u.CostUSD != 0.00688 || u.Searches != 1 {
				t.Errorf("usage = %+v, want usage.cost.total_cost 0.00688 and one web_search call", u)
			}
		},
		Unicode: []enginetest.Response{enginetest.JSON(perplexityAgent)},
		CheckUnicode: func(t *testing.T, r *engines.Result) {
			// url_citation offsets count code points; "°" is two bytes.
			enginetest.MarkerAfter(t, r.Summary, "fog clearing by noon.", "[1][2]")
			enginetest.MarkerAfter(t, r.Summary, "through the evening.", "[3]")
		},
		Empty:       []enginetest.Response{{Body: []byte(`{"id":"resp_empty","object":"response","created_at":1764547200,"status":"completed","model":"perplexity/sonar","output":[{"type":"search_results","queries":["q"],"results":[]},{"type":"message","id":"msg_e","status":"completed","role":"assistant","content":[{"type":"output_text","text":"I could not find any information on that.","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":10,"total_tokens":19,"cost":{"currency":"USD","input_cost":0,"output_cost":0,"tool_calls_cost":0.005,"total_cost":0.005}}}`)}},
		RateLimited: enginetest.Status(429, `{"error":{"message":"Rate limit exceeded","type":"rate_limit_exceeded","code":"429"}}`),
		QueryOf:     perplexityInput,
		KeyOf:       glmBearerKey,
	})
}

// Filters go into the Agent API request as web_search tool settings.
func TestPerplexityRequest(t *testing.T) {
	t.Parallel()
	body := enginetest.JSON(perplexityAgent)
	type filters struct {
		SearchDomainFilter   []string `json:"search_domain_filter"`
		SearchRecencyFilter  string   `json:"search_recency_filter"`
		SearchLanguageFilter []string `json:"search_language_filter"`
	}
	type sent struct {
		Preset, Model, Input string
		Tools                []struct {
			Type         string   `json:"type"`
			Filters      *filters `json:"filters"`
			UserLocation *struct {
				Country string `json:"country"`
			} `json:"user_location"`
		} `json:"tools"`
	}
	read := func(cfg engines.Config, q engines.Query) sent {
		t.Helper()
		cfg.Kind = "perplexity"
		_, reqs := enginetest.Search(t, cfg, q, body)
		var s sent
		json.Unmarshal(reqs[0].Body, &s)
		if reqs[0].Path != "/v1/agent" || reqs[0].Method != http.MethodPost {
			t.Errorf("request = %s %q, want POST /v1/agent", reqs[0].Method, reqs[0].Path)
		}
		if len(s.Tools) != 1 || s.Tools[0].Type != "web_search" {
			t.Fatalf("tools = %+v, want one web_search", s.Tools)
		}
		return s
	}
	s := read(engines.Config{}, engines.Query{Query: "population", Recency: engines.OneWeek, AllowedDomains: []string{"wikipedia.org", "census.gov"}, Country: "us", Language: "en-GB"})
	f := s.Tools[0].Filters
	if s.Preset != "fast" || s.Model != "" || s.Input != "population" || f == nil ||
		!reflect.DeepEqual(f.SearchDomainFilter, []string{"wikipedia.org", "census.gov"}) || f.SearchRecencyFilter != "week" ||
		!reflect.DeepEqual(f.SearchLanguageFilter, []string{"en"}) || s.Tools[0].UserLocation == nil || s.Tools[0].UserLocation.Country != "US" {
		t.Errorf("sent %+v (filters %+v)", s, f)
	}
	s = read(engines.Config{Model: "sonar"}, engines.Query{Query: "population", BlockedDomains: []string{"pinterest.com"}})
	if s.Model != "perplexity/sonar" || s.Preset != "" || !reflect.DeepEqual(s.Tools[0].Filters.SearchDomainFilter, []string{"-pinterest.com"}) ||
		s.Tools[0].Filters.SearchRecencyFilter != "" || s.Tools[0].UserLocation != nil {
		t.Errorf("sent %+v", s)
	}
	s = read(engines.Config{Options: json.RawMessage(`{"preset":"high"}`)}, engines.Query{Query: "population"})
	if s.Preset != "high" || s.Tools[0].Filters != nil {
		t.Errorf("sent %+v", s)
	}
	if _, err := engines.FromConfig([]engines.Config{{ID: "p", Kind: "perplexity", Model: "sonar", Options: json.RawMessage(`{"preset":"high"}`)}}, nil); err == nil {
		t.Error("a model and a preset together were accepted")
	}
}

// The domain filter is checked on the answer: sources outside it go, with their
// markers, and the rest are renumbered.
func TestPerplexityDomainsEnforced(t *testing.T) {
	t.Parallel()
	res, err := engines.Normalize(engines.Config{Kind: "perplexity"}, engines.Query{Query: "San Francisco weather", AllowedDomains: []string{"weather.gov"}},
		fixtures.Read(perplexityAgent))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	var uris []string
	for _, s := range res.Citation.Sources {
		uris = append(uris, s.Web.URI)
	}
	want := []string{"https://forecast.weather.gov/MapClick.php?lat=37.7749&lon=-122.4194"}
	if !reflect.DeepEqual(uris, want) || len(res.Hits) != 1 {
		t.Errorf("sources = %q, hits = %d", uris, len(res.Hits))
	}
	enginetest.MarkerAfter(t, res.Summary, "fog clearing by noon.", "[1] Winds")
	if !strings.HasSuffix(res.Summary, "through the evening.") {
		t.Errorf("summary = %q, want the windy.com marker gone", res.Summary)
	}
}

// An error Perplexity answers with status 200 is read as the error it names.
func TestPerplexityInBandError(t *testing.T) {
	t.Parallel()
	_, err := engines.Normalize(engines.Config{Kind: "perplexity"}, engines.Query{Query: "q"},
		[]byte(`{"error":{"message":"Invalid model 'sonar-x'","type":"invalid_model","code":400}}`))
	if e := engines.AsError("p", err); e.Kind != engines.BadRequest || !strings.Contains(e.Message, "Invalid model") {
		t.Fatalf("in-band error read as %+v", e)
	}
}
