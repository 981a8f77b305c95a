package engines_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

const exaSearch = "exa/docs-shape-search-highlights.CONSTRUCTED.json"

func TestExaConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "exa"},
		OK:     []enginetest.Response{enginetest.JSON(exaSearch)},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 5 {
				t.Fatalf("hits = %d, want 5", len(r.Hits))
			}
			if h := r.Hits[0]; h.Title != "A Comprehensive Overview of Large Language Models" || h.URL != "https://arxiv.org/abs/2307.06435" {
				t.Errorf("hit 1 = %q %q", h.Title, h.URL)
			}
			if !strings.Contains(r.Citation.LLMContent, "[3] LLM Powered Autonomous Agents (https://lilianweng.github.io/posts/2023-06-23-agent/)\n    Building agents with LLM") {
				t.Errorf("LLMContent lacks numbered source 3 with its highlight:\n%s", r.Citation.LLMContent)
			}
			if r.Usage.CostUSD != 0.011 {
				t.Errorf("cost = %v, want costDollars.total 0.011", r.Usage.CostUSD)
			}
			if len(r.Warnings) != 0 {
				t.Errorf("warnings = %v", r.Warnings)
			}
		},
		Empty:       []enginetest.Response{{Body: []byte(`{"requestId":"0f3e","results":[],"costDollars":{"total":0.005,"search":{"neural":0.005}}}`)}},
		RateLimited: enginetest.Status(429, "exa/docs-shape-429-rate-limited.CONSTRUCTED.json"),
		ServerError: enginetest.Status(500, `{"requestId":"9a1b","error":"Internal server error","tag":"INTERNAL_ERROR"}`),
		AuthError:   enginetest.Status(401, "exa/docs-shape-401-invalid-api-key.CONSTRUCTED.json"),
		QueryOf: func(_ *http.Request, body []byte) string {
			var v struct{ Query string }
			json.Unmarshal(body, &v)
			return v.Query
		},
		KeyOf: func(r *http.Request) string { return r.Header.Get("x-api-key") },
	})
}

func TestExaSearchFixture(t *testing.T) {
	t.Parallel()
	res, err := engines.Normalize(engines.Config{Kind: "exa"}, engines.Query{Query: "llm agents"}, fixtures.Read(exaSearch))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	want := []struct {
		title, url, snippet string
		published           time.Time
	}{
		{"A Comprehensive Overview of Large Language Models", "https://arxiv.org/abs/2307.06435",
			"Large Language Models (LLMs) have recently demonstrated remarkable capabilities in natural language processing tasks and beyond. … This article provides a comprehensive overview of the recent developments in LLM research.",
			time.Date(2023, 7, 12, 0, 0, 0, 0, time.UTC)},
		{"Building effective agents", "https://www.anthropic.com/research/building-effective-agents",
			"Anthropic describes patterns for building LLM agents: start with simple, composable workflows and add autonomy only when it pays off.",
			time.Date(2024, 12, 19, 0, 0, 0, 0, time.UTC)},
		{"LLM Powered Autonomous Agents", "https://lilianweng.github.io/posts/2023-06-23-agent/",
			"Building agents with LLM (large language model) as its core controller is a cool concept.", time.Time{}},
		{"大模型智能体综述：规划、记忆与工具使用 🤖", "https://www.jiqizhixin.com/articles/2024-05-20-3", "", time.Date(2024, 5, 20, 0, 0, 0, 0, time.UTC)},
		{"Introducing smolagents, a simple library to build agents", "https://huggingface.co/blog/smolagents",
			"Today we are launching smolagents, a very simple library that unlocks agentic capabilities for language models. Here's a glimpse: from smolagents import CodeAgent, DuckDuckGoSearchTool, HfApiModel.",
			time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC)},
		{"", "https://example.org/empty", "", time.Time{}},
	}
	if len(res.Hits) != len(want) {
		t.Fatalf("hits = %d, want %d", len(res.Hits), len(want))
	}
	for i, w := range want {
		h := res.Hits[i]
		if h.Title != w.title || h.URL != w.url || !h.Published.Equal(w.published) {
			t.Errorf("hit %d = %q %q %v, want %q %q %v", i+1, h.Title, h.URL, h.Published, w.title, w.url, w.published)
		}
		if i != 3 && h.Snippet != w.snippet {
			t.Errorf("hit %d snippet = %q\nwant %q", i+1, h.Snippet, w.snippet)
		}
	}
	if !strings.Contains(res.Citation.LLMContent, "[6] example.org (https://example.org/empty)\n") {
		t.Errorf("an untitled hit is not listed by its host:\n%s", res.Citation.LLMContent)
	}
	if res.Usage.CostUSD != 0.011 {
		t.Errorf("cost = %v", res.Usage.CostUSD)
	}
}

// The exa-py docs example: no contents, no costDollars, a null author.
func TestExaDocsExample(t *testing.T) {
	t.Parallel()
	body := fixtures.Read("exa/sdk-spec-search-return-example.json")
	res, err := engines.Normalize(engines.Config{Kind: "exa"}, engines.Query{Query: "hottest AI startups"}, body)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	if len(res.Hits) != 2 {
		t.Fatalf("hits = %d, want 2", len(res.Hits))
	}
	for i, w := range []struct {
		title, url, source string
		published          time.Time
	}{
		{"Adept: Useful General Intelligence", "https://www.adept.ai/", "adept.ai", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"Home | Tenyx, Inc.", "https://www.tenyx.com/", "tenyx.com", time.Date(2019, 9, 10, 0, 0, 0, 0, time.UTC)},
	} {
		h := res.Hits[i]
		if h.Title != w.title || h.URL != w.url || h.Source != w.source || !h.Published.Equal(w.published) || h.Snippet != "" {
			t.Errorf("hit %d = %+v", i+1, h)
		}
	}
	if res.Usage.CostUSD != 0.007 {
		t.Errorf("cost = %v, want the default 0.007", res.Usage.CostUSD)
	}
	price := 0.005
	res, err = engines.Normalize(engines.Config{Kind: "exa", CostPerSearchUSD: &price}, engines.Query{Query: "hottest AI startups"}, body)
	if err != nil || res.Usage.CostUSD != 0.005 {
		t.Errorf("configured price: cost = %v, err = %v", res.Usage.CostUSD, err)
	}
}

func TestExaUnicode(t *testing.T) {
	t.Parallel()
	res, _ := enginetest.Search(t, engines.Config{Kind: "exa"}, engines.Query{Query: "大模型 智能体 🤖"}, enginetest.JSON(exaSearch))
	var raw struct {
		Results []struct{ Highlights []string } `json:"results"`
	}
	if err := json.Unmarshal(fixtures.Read(exaSearch), &raw); err != nil {
		t.Fatal(err)
	}
	h := res.Hits[3]
	if h.Title != "大模型智能体综述：规划、记忆与工具使用 🤖" {
		t.Errorf("title = %q", h.Title)
	}
	classicCheckClipped(t, res, h, strings.Join(raw.Results[3].Highlights, " … "))
}

func TestExaErrors(t *testing.T) {
	t.Parallel()
	q := engines.Query{Query: "llm agents"}
	for _, tc := range []struct {
		resp enginetest.Response
		kind engines.ErrorKind
		msg  string
	}{
		{enginetest.Status(401, "exa/docs-shape-401-invalid-api-key.CONSTRUCTED.json"), engines.Auth, "Invalid API key"},
		{enginetest.Status(402, "exa/docs-shape-402-no-more-credits.CONSTRUCTED.json"), engines.Quota, "You have run out of credits."},
		{enginetest.Status(429, "exa/docs-shape-429-rate-limited.CONSTRUCTED.json"), engines.RateLimited, "Rate limit exceeded: 10 requests per second."},
		{enginetest.Status(400, `{"requestId":"f96f","error":"Invalid request body | Validation error: Expected array, received string at \"excludeDomains\"","tag":"INVALID_REQUEST_BODY"}`), engines.BadRequest, "Expected array"},
	} {
		_, err, _ := enginetest.Do(t, engines.Config{Kind: "exa"}, q, tc.resp)
		e := classicWantError(t, err, tc.kind, tc.msg)
		if e.Status != tc.resp.Status || e.RetryAfter != 0 {
			t.Errorf("error = %+v", e)
		}
	}
}

// Count, domains and recency are sent in the body; language and country, which Exa has
// no parameter for, are warned about; hits Exa returns outside the domains are dropped.
func TestExaFiltersOnTheWire(t *testing.T) {
	t.Parallel()
	before := time.Now()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "exa", Options: json.RawMessage(`{"type":"neural"}`)}, engines.Query{
		Query:          "llm agents",
		Recency:        engines.OneMonth,
		Count:          7,
		AllowedDomains: []string{"arxiv.org"},
		BlockedDomains: []string{"example.org"},
		Language:       "de",
		Country:        "DE",
	}, enginetest.JSON(exaSearch))
	if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/search" || reqs[0].Header.Get("x-api-key") != "sk-test-key" {
		t.Fatalf("requests = %+v", reqs)
	}
	var sent struct {
		Query              string   `json:"query"`
		Type               string   `json:"type"`
		NumResults         int      `json:"numResults"`
		IncludeDomains     []string `json:"includeDomains"`
		ExcludeDomains     []string `json:"excludeDomains"`
		StartPublishedDate string   `json:"startPublishedDate"`
		Contents           struct {
			Highlights struct {
				NumSentences int `json:"numSentences"`
			} `json:"highlights"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(reqs[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Query != "llm agents" || sent.Type != "neural" || sent.NumResults != 7 || sent.Contents.Highlights.NumSentences != 2 ||
		strings.Join(sent.IncludeDomains, ",") != "arxiv.org" || strings.Join(sent.ExcludeDomains, ",") != "example.org" {
		t.Errorf("body = %s", reqs[0].Body)
	}
	start, err := time.Parse(time.RFC3339, sent.StartPublishedDate)
	if lo, hi := before.Add(-31*24*time.Hour-time.Second), time.Now().Add(-31*24*time.Hour+time.Second); err != nil || start.Before(lo) || start.After(hi) {
		t.Errorf("startPublishedDate = %q (%v), want 31 days ago", sent.StartPublishedDate, err)
	}
	if len(res.Hits) != 1 || res.Hits[0].URL != "https://arxiv.org/abs/2307.06435" {
		t.Errorf("hits = %+v", res.Hits)
	}
	classicWantWarning(t, res, "5 hit(s) outside the domain filters")
	classicWantWarning(t, res, `language "de" is not supported by engine`)
	classicWantWarning(t, res, `country "DE" is not supported by engine`)

	_, reqs = enginetest.Search(t, engines.Config{Kind: "exa"}, engines.Query{Query: "llm"}, enginetest.JSON(exaSearch))
	if b := string(reqs[0].Body); !strings.Contains(b, `"type":"auto"`) || !strings.Contains(b, `"numResults":10`) || strings.Contains(b, "Domains") || strings.Contains(b, "startPublishedDate") {
		t.Errorf("default body = %s", b)
	}
}

// Every documented search type is accepted and sent; an unknown one and the retired
// crawl-date filters are refused when the engine is built, with the reason.
func TestExaCurrentAPI(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"auto", "instant", "fast", "deep", "deep-reasoning", "lite", "neural", "keyword"} {
		_, reqs := enginetest.Search(t, engines.Config{Kind: "exa", Options: json.RawMessage(`{"type":"` + typ + `"}`)},
			engines.Query{Query: "q", Recency: engines.OneWeek}, enginetest.JSON(exaSearch))
		var sent map[string]any
		json.Unmarshal(reqs[0].Body, &sent)
		if sent["type"] != typ || sent["startPublishedDate"] == nil {
			t.Errorf("type %s: sent %v", typ, sent)
		}
		for _, retired := range []string{"startCrawlDate", "endCrawlDate", "useAutoprompt"} {
			if _, ok := sent[retired]; ok {
				t.Errorf("type %s: sent the retired %s", typ, retired)
			}
		}
	}
	for opts, want := range map[string]string{
		`{"type":"magic"}`:                  "not an Exa search type",
		`{"startCrawlDate":"2026-01-01"}`:   "retired",
		`{"endCrawlDate":"2026-06-01T00Z"}`: "Exa ignores them",
	} {
		_, err := engines.FromConfig([]engines.Config{{ID: "exa", Kind: "exa", Options: json.RawMessage(opts)}}, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("options %s: err = %v, want %q", opts, err, want)
		}
	}
}
