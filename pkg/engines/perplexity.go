package engines

import (
	"context"
	"net/http"
	"strings"
)

// perplexity is Perplexity Sonar (POST {base}/chat/completions, bearer key, default
// base https://api.perplexity.ai, default model sonar): every call searches the web
// and answers with [n] markers that are 1-based indexes into the response's
// search_results / citations (WIRE_FORMATS.md §7).
//
// Options: {"searchContextSize": "low"|"medium"|"high"}. The default is low: it is
// the cheapest request fee ($5 per 1K requests on sonar) and what the recorded
// responses used; a search tool wants sources more than a long essay.
//
// Cost is what Perplexity reports (usage.cost.total_cost, else the sum of its parts);
// when a response carries no cost, the configured or list request fee for the context
// size plus tokens at the model's list price.
type perplexity struct {
	client
	model string
	opts  perplexityOptions
	fee   float64
}

type perplexityOptions struct {
	SearchContextSize string `json:"searchContextSize,omitempty"`
}

// perplexityFee is sonar's request fee by search context size, in USD (docs).
var perplexityFee = map[string]float64{"low": 0.005, "medium": 0.008, "high": 0.012}

// perplexityTokenUSD is the list price per million input and output tokens by model
// (docs); unknown models are priced as sonar.
var perplexityTokenUSD = map[string][2]float64{
	"sonar":               {1, 1},
	"sonar-pro":           {3, 15},
	"sonar-reasoning":     {1, 5},
	"sonar-reasoning-pro": {2, 8},
	"sonar-deep-research": {2, 8},
}

// perplexityMaxDomains is how many entries search_domain_filter accepts (docs).
const perplexityMaxDomains = 20

func newPerplexity(cfg Config, hc *http.Client) (Engine, error) {
	e := &perplexity{client: newClient(cfg, hc, "https://api.perplexity.ai"), model: cfg.Model}
	if err := cfg.options(&e.opts); err != nil {
		return nil, err
	}
	if e.model == "" {
		e.model = "sonar"
	}
	if e.opts.SearchContextSize == "" {
		e.opts.SearchContextSize = "low"
	}
	fee, ok := perplexityFee[e.opts.SearchContextSize]
	if !ok {
		fee = perplexityFee["low"]
	}
	e.fee = cfg.price(fee)
	return e, nil
}

func (e *perplexity) Name() string { return e.id }

// Capabilities: recency, domains and country are request fields. Sonar has no result
// count (its answer cites what it cites) and no language filter.
func (e *perplexity) Capabilities() Capabilities {
	return Capabilities{Recency: true, AllowedDomains: true, BlockedDomains: true, Country: true}
}

type perplexityRequest struct {
	Model               string                  `json:"model"`
	Messages            []perplexityMessage     `json:"messages"`
	SearchDomainFilter  []string                `json:"search_domain_filter,omitempty"`
	SearchRecencyFilter string                  `json:"search_recency_filter,omitempty"`
	WebSearchOptions    perplexitySearchOptions `json:"web_search_options"`
}

type perplexityMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type perplexitySearchOptions struct {
	SearchContextSize string              `json:"search_context_size,omitempty"`
	UserLocation      *perplexityLocation `json:"user_location,omitempty"`
}

type perplexityLocation struct {
	Country string `json:"country"`
}

type perplexityResponse struct {
	Model         string   `json:"model"`
	Citations     []string `json:"citations"`
	SearchResults []struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Date    string `json:"date"` // may be null
		Snippet string `json:"snippet"`
	} `json:"search_results"`
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		NumSearchQueries int `json:"num_search_queries"`
		Cost             *struct {
			InputTokensCost  *float64 `json:"input_tokens_cost"`
			OutputTokensCost *float64 `json:"output_tokens_cost"`
			RequestCost      *float64 `json:"request_cost"`
			TotalCost        *float64 `json:"total_cost"`
		} `json:"cost"`
	} `json:"usage"`
	Error *openrouterErrorBody `json:"error"`
}

var perplexityRecency = map[Recency]string{OneDay: "day", OneWeek: "week", OneMonth: "month", OneYear: "year"}

func (e *perplexity) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, &Error{Kind: Auth, Engine: e.id, Message: "no API key configured"}
	}
	req := perplexityRequest{
		Model:               e.model,
		Messages:            []perplexityMessage{{Role: "user", Content: q.Query}},
		SearchDomainFilter:  perplexityDomains(q),
		SearchRecencyFilter: perplexityRecency[q.Recency],
		WebSearchOptions:    perplexitySearchOptions{SearchContextSize: e.opts.SearchContextSize},
	}
	if len(q.Country) == 2 {
		req.WebSearchOptions.UserLocation = &perplexityLocation{Country: strings.ToUpper(q.Country)}
	}
	body, _, err := e.do(ctx, request{path: "/chat/completions", header: bearer(e.key), body: req})
	if err != nil {
		return nil, err
	}
	return e.parse(q, [][]byte{body})
}

// perplexityDomains is the search_domain_filter for q: allowed domains as they are, or
// blocked ones prefixed "-". Perplexity takes one mode at a time and at most 20
// entries; parse enforces whatever did not fit.
func perplexityDomains(q Query) []string {
	if len(q.AllowedDomains) > 0 {
		return q.AllowedDomains[:min(len(q.AllowedDomains), perplexityMaxDomains)]
	}
	var out []string
	for _, d := range q.BlockedDomains[:min(len(q.BlockedDomains), perplexityMaxDomains)] {
		out = append(out, "-"+d)
	}
	return out
}

func (e *perplexity) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp perplexityResponse
	if err := decode(&e.client, bodies[0], &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil && len(resp.Choices) == 0 {
		return nil, openrouterInBand(&e.client, resp.Error, bodies[0])
	}
	res := &Result{Usage: Usage{
		Searches:     max(resp.Usage.NumSearchQueries, 1),
		InputTokens:  resp.Usage.PromptTokens,
		OutputTokens: resp.Usage.CompletionTokens,
		CostUSD:      e.cost(&resp),
	}}
	if len(resp.Choices) > 0 {
		c := resp.Choices[0]
		res.Summary = perplexityStripThink(c.Message.Content)
		if c.FinishReason == "length" {
			res.warnf("the answer was cut at the model's token limit")
		}
	}

	// The markers index citations and search_results alike (same order); use the
	// longer list so no marker loses its source, with titles from search_results.
	titles := make(map[string]string, len(resp.SearchResults))
	for _, r := range resp.SearchResults {
		titles[r.URL] = r.Title
		h := Hit{Title: r.Title, URL: r.URL, Snippet: r.Snippet}
		if r.Date != "" {
			h.Published = parseDate(r.Date)
		}
		res.Hits = append(res.Hits, h)
	}
	urls := resp.Citations
	if len(resp.SearchResults) > len(urls) {
		urls = urls[:0:0]
		for _, r := range resp.SearchResults {
			urls = append(urls, r.URL)
		}
	}
	for _, u := range urls {
		res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{Title: titles[u], URI: u}})
	}
	if len(resp.SearchResults) == 0 {
		for _, u := range resp.Citations {
			res.Hits = append(res.Hits, Hit{URL: u})
		}
	}
	if len(q.AllowedDomains) > perplexityMaxDomains {
		res.warnf("Perplexity takes at most %d domains: only the first %d allowed domains were searched", perplexityMaxDomains, perplexityMaxDomains)
	}
	return res, nil
}

// cost is the response's reported cost, else the list price.
func (e *perplexity) cost(resp *perplexityResponse) float64 {
	if c := resp.Usage.Cost; c != nil {
		if c.TotalCost != nil {
			return *c.TotalCost
		}
		sum, found := 0.0, false
		for _, p := range []*float64{c.RequestCost, c.InputTokensCost, c.OutputTokensCost} {
			if p != nil {
				sum += *p
				found = true
			}
		}
		if found {
			return sum
		}
	}
	model := resp.Model
	if model == "" {
		model = e.model
	}
	rate, ok := perplexityTokenUSD[model]
	if !ok {
		rate = perplexityTokenUSD["sonar"]
	}
	return e.fee + (float64(resp.Usage.PromptTokens)*rate[0]+float64(resp.Usage.CompletionTokens)*rate[1])/1e6
}

// perplexityStripThink removes the <think>…</think> reasoning that sonar-reasoning
// models put before the answer; an unclosed <think> drops the rest of the text, which
// is all reasoning.
func perplexityStripThink(s string) string {
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			return strings.TrimSpace(s)
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			return strings.TrimSpace(s[:i])
		}
		s = s[:i] + s[i+j+len("</think>"):]
	}
}
