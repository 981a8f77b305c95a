package engines_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

func TestPerplexityConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "perplexity"},
		OK:     []enginetest.Response{enginetest.JSON("perplexity/markwatson-sonar-search-results.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Citation.Sources) != 11 {
				t.Fatalf("sources = %d, want 11", len(r.Citation.Sources))
			}
			if s := r.Citation.Sources[0].Web; s.Title != "A Lisp Programmer Living in… by Mark Watson [PDF/iPad/Kindle]" || s.URI != "https://leanpub.com/hy-lisp-python" {
				t.Errorf("source 1 = %+v", s)
			}
			if s := r.Citation.Sources[1].Web; s.URI != "https://markwatson.com/llms.txt" {
				t.Errorf("source 2 = %+v", s)
			}
			// The markers are Perplexity's own, 1-based into search_results.
			enginetest.MarkerAfter(t, r.Summary, "LangChain in his work", "[1][5][6].")
			enginetest.MarkerAfter(t, r.Summary, "as part of his hobbies", "[2].")
			enginetest.MarkerAfter(t, r.Summary, "books, and profiles", "[1][2][5][6].")
			// The suite asks for 5 hits: Sonar has no count, so they are cut afterwards.
			if len(r.Hits) != 5 {
				t.Fatalf("hits = %d, want 5", len(r.Hits))
			}
			if h := r.Hits[0]; !h.Published.Equal(time.Date(2025, 8, 20, 0, 0, 0, 0, time.UTC)) || !strings.HasPrefix(h.Snippet, "A Lisp Programmer Living in Python-Land") {
				t.Errorf("hit 1 = %+v", h)
			}
			if h := r.Hits[1]; !h.Published.IsZero() || h.Title != "https://markwatson.com/llms.txt" {
				t.Errorf("hit 2 (date null) = %+v", h)
			}
			if u := r.Usage; u.InputTokens != 27 || u.OutputTokens != 230 || u.CostUSD != 0.005 || u.Searches != 1 {
				t.Errorf("usage = %+v, want usage.cost.total_cost 0.005", u)
			}
		},
		Empty:       []enginetest.Response{{Body: []byte(`{"id":"ecc7aa86-4434-4d70-8dfa-e85b7c7e27d6","model":"sonar","created":1759702702,"usage":{"prompt_tokens":9,"completion_tokens":14,"total_tokens":23,"search_context_size":"low","cost":{"input_tokens_cost":0.0,"output_tokens_cost":0.0,"request_cost":0.005,"total_cost":0.005}},"citations":[],"search_results":[],"object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"I could not find any information on that."},"delta":{"role":"assistant","content":""}}]}`)}},
		RateLimited: enginetest.Status(429, `{"error":{"message":"Rate limit exceeded","type":"rate_limit_exceeded","code":429}}`),
		QueryOf:     perplexityInput,
		KeyOf:       glmBearerKey,
	})
}

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

// The 2026 recordings carry citations but no search_results: the URLs are the
// sources, untitled, and the cost is the list price since usage has no cost.
func TestPerplexityCitationsOnly(t *testing.T) {
	t.Parallel()
	res, err := engines.Normalize(engines.Config{Kind: "perplexity"}, engines.Query{Query: "San Francisco population"},
		fixtures.Read("perplexity/vercel-perplexity-citations.json"))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	if len(res.Citation.Sources) != 7 || len(res.Hits) != 7 {
		t.Fatalf("sources = %d, hits = %d, want 7", len(res.Citation.Sources), len(res.Hits))
	}
	if s := res.Citation.Sources[6].Web; s.URI != "https://worldpopulationreview.com/us-counties/california/san-francisco-county" || s.Title != "" {
		t.Errorf("source 7 = %+v", s)
	}
	enginetest.MarkerAfter(t, res.Summary, "authoritative U.S. data sources.", "[2][3][5][7]")
	enginetest.MarkerAfter(t, res.Summary, "(San Francisco County 2026 projection).", "[7]")
	if !strings.Contains(res.Citation.LLMContent, "[7] worldpopulationreview.com (https://worldpopulationreview.com/us-counties/california/san-francisco-county)") {
		t.Errorf("LLMContent:\n%s", res.Citation.LLMContent)
	}
	if u := res.Usage; u.InputTokens != 10 || u.OutputTokens != 251 || !glmNear(u.CostUSD, 0.005+261e-6) {
		t.Errorf("usage = %+v", u)
	}
}

func TestPerplexityText(t *testing.T) {
	t.Parallel()
	res, err := engines.Normalize(engines.Config{Kind: "perplexity"}, engines.Query{Query: "EcoVista Day"},
		fixtures.Read("perplexity/vercel-perplexity-text.json"))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	if len(res.Citation.Sources) != 6 || res.Citation.Sources[3].Web.URI != "https://www.youtube.com/watch?v=GVxMMHAwzIU" {
		t.Errorf("sources = %+v", res.Citation.Sources)
	}
	enginetest.MarkerAfter(t, res.Summary, "dedicated to envisioning and creating sustainable futures through innovative, nature-inspired decorations and communal creativity.", "[1][2]")
	enginetest.MarkerAfter(t, res.Summary, "accessible and forward-thinking.", "[5]")
	if got, want := engines.Markers(res.Summary), []int{1, 2, 1, 3, 1, 2, 3, 1, 4, 2, 3, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("markers = %v, want the recorded %v", got, want)
	}
	if !glmNear(res.Usage.CostUSD, 0.005+403e-6) {
		t.Errorf("cost = %v", res.Usage.CostUSD)
	}
}

// perplexityAssemble joins a recorded stream (one chunk per line) into the
// non-streaming body it stands for: concatenated deltas, the last citations and usage.
func perplexityAssemble(t *testing.T, chunks []byte) ([]byte, string) {
	t.Helper()
	var (
		content   strings.Builder
		citations []string
		usage     json.RawMessage
		lastObj   string
		finish    string
	)
	sc := bufio.NewScanner(bytes.NewReader(chunks))
	for sc.Scan() {
		var c struct {
			Object    string          `json:"object"`
			Citations []string        `json:"citations"`
			Usage     json.RawMessage `json:"usage"`
			Choices   []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			content.WriteString(ch.Delta.Content)
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
		citations, usage, lastObj = c.Citations, c.Usage, c.Object
	}
	body, _ := json.Marshal(map[string]any{
		"object":    "chat.completion",
		"model":     "sonar",
		"citations": citations,
		"usage":     usage,
		"choices":   []any{map[string]any{"index": 0, "finish_reason": finish, "message": map[string]any{"role": "assistant", "content": content.String()}}},
	})
	return body, lastObj
}

// The recorded stream (an excerpt of the answer): every chunk repeats the citations,
// markers arrive as their own deltas, the last chunk is chat.completion.done.
func TestPerplexityStreamChunks(t *testing.T) {
	t.Parallel()
	body, last := perplexityAssemble(t, fixtures.Read("perplexity/vercel-perplexity-citations-stream.chunks.jsonl"))
	if last != "chat.completion.done" {
		t.Errorf("last chunk object = %q", last)
	}
	res, err := engines.Normalize(engines.Config{Kind: "perplexity"}, engines.Query{Query: "San Francisco population"}, body)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	if res.Summary != "The current population of **[2][3]" {
		t.Errorf("summary = %q", res.Summary)
	}
	if len(res.Citation.Sources) != 7 || res.Citation.Sources[1].Web.URI != "https://en.wikipedia.org/wiki/San_Francisco" || res.Citation.Sources[2].Web.URI != "https://fred.stlouisfed.org/graph/?g=4K5j" {
		t.Errorf("sources = %+v", res.Citation.Sources)
	}
	if u := res.Usage; u.InputTokens != 10 || u.OutputTokens != 336 {
		t.Errorf("usage = %+v", u)
	}
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
	res, err := engines.Normalize(engines.Config{Kind: "perplexity"}, engines.Query{Query: "Mark Watson", AllowedDomains: []string{"markwatson.com"}},
		fixtures.Read("perplexity/markwatson-sonar-search-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	var uris []string
	for _, s := range res.Citation.Sources {
		uris = append(uris, s.Web.URI)
	}
	want := []string{"https://markwatson.com/llms.txt", "https://markwatson.com", "https://markwatson.com/opencontent/book_lisp.pdf"}
	if !reflect.DeepEqual(uris, want) || len(res.Hits) != 3 {
		t.Errorf("sources = %q, hits = %d", uris, len(res.Hits))
	}
	enginetest.MarkerAfter(t, res.Summary, "as part of his hobbies", "[1].")
	enginetest.MarkerAfter(t, res.Summary, "LangChain in his work", ".")
}

// sonar-reasoning puts its reasoning in <think>; only the answer is kept. An error
// envelope inside a 200 is classified by its code.
func TestPerplexityThinkAndInBandError(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"sonar-reasoning-pro","citations":["https://a.example/1"],"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"<think>\nThe user wants [1] and more.\n</think>\n\nThe answer is 42[1]."}}],"usage":{"prompt_tokens":1000,"completion_tokens":1000}}`)
	res, err := engines.Normalize(engines.Config{Kind: "perplexity", Model: "sonar-reasoning-pro"}, engines.Query{Query: "q"}, body)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != "The answer is 42[1]." {
		t.Errorf("summary = %q", res.Summary)
	}
	if !glmNear(res.Usage.CostUSD, 0.005+(1000*2+1000*8)/1e6) {
		t.Errorf("cost = %v, want request fee + sonar-reasoning-pro tokens", res.Usage.CostUSD)
	}
	_, err, _ = enginetest.Do(t, engines.Config{Kind: "perplexity"}, engines.Query{Query: "q"},
		enginetest.Response{Body: []byte(`{"error":{"message":"Invalid model 'sonar-x'","type":"invalid_model","code":400}}`)})
	var e *engines.Error
	if !errors.As(err, &e) || e.Kind != engines.BadRequest || !strings.Contains(e.Message, "Invalid model") {
		t.Errorf("err = %v", err)
	}
}
