package engines

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// perplexity is Perplexity's Agent API (POST {base}/v1/agent, bearer key, default base
// https://api.perplexity.ai): a Responses-shaped call with the built-in web_search
// tool, answered with search_results output items, a message whose output_text
// carries url_citation annotations, and usage with a cost breakdown
// (WIRE_FORMATS.md §7; the response is read by the Responses model codec, with the
// two Perplexity additions read beside it).
//
// The call names a preset ("fast", the default, "low", "medium", "high", "xhigh",
// or any other preset Perplexity lists) or, when Config.Model is set, a model; a
// model without a provider prefix is Perplexity's own ("sonar" → "perplexity/sonar").
//
// Options: {"preset": "<name>"}.
//
// Filters: allowed or blocked domains (search_domain_filter, at most 20, blocked ones
// prefixed "-"), recency (search_recency_filter), language (search_language_filter)
// and country (user_location.country) are tool settings; the result count is not.
//
// Cost is what Perplexity reports (usage.cost.total_cost); without it, $5 per 1,000
// web_search calls (the tool's list price) times the calls the answer reports.
type perplexity struct {
	client
	model  string
	preset string
}

// perplexitySearchFee is the web_search tool's list price per call, in USD (docs).
const perplexitySearchFee = 0.005

// perplexityMaxDomains is how many entries search_domain_filter accepts (docs).
const perplexityMaxDomains = 20

func newPerplexity(cfg Config, hc *http.Client) (Engine, error) {
	e := &perplexity{client: newClient(cfg, hc, "https://api.perplexity.ai")}
	var o struct {
		Preset string `json:"preset,omitempty"`
	}
	if err := optionsOf(cfg, &o); err != nil {
		return nil, err
	}
	if m := strings.TrimSpace(cfg.Model); m != "" {
		if !strings.Contains(m, "/") {
			m = "perplexity/" + m
		}
		e.model = m
	} else {
		e.preset = cmp.Or(strings.TrimSpace(o.Preset), "fast")
	}
	if e.model != "" && o.Preset != "" {
		return nil, fmt.Errorf("engine %q: set a model or options.preset, not both", cfg.ID)
	}
	e.price = priceOf(cfg, perplexitySearchFee)
	e.caps = Capabilities{Recency: true, AllowedDomains: true, BlockedDomains: true, Country: true, Language: true}
	return e, nil
}

type perplexityAgentRequest struct {
	Preset       string                `json:"preset,omitempty"`
	Model        string                `json:"model,omitempty"`
	Input        string                `json:"input"`
	Instructions string                `json:"instructions,omitempty"`
	Tools        []perplexityAgentTool `json:"tools"`
}

type perplexityAgentTool struct {
	Type         string              `json:"type"`
	Filters      *perplexityFilters  `json:"filters,omitempty"`
	UserLocation *perplexityLocation `json:"user_location,omitempty"`
}

type perplexityFilters struct {
	SearchDomainFilter   []string `json:"search_domain_filter,omitempty"`
	SearchRecencyFilter  string   `json:"search_recency_filter,omitempty"`
	SearchLanguageFilter []string `json:"search_language_filter,omitempty"`
}

type perplexityLocation struct {
	Country string `json:"country"`
}

// perplexityAgentExtra is what a Perplexity answer adds to the Responses shape: its
// search_results output items and the cost in its usage.
type perplexityAgentExtra struct {
	// Error is an error answered with status 200 (a body without output).
	Error  *openrouterErrorBody `json:"error"`
	Output []struct {
		Type    string                   `json:"type"`
		Results []perplexitySearchResult `json:"results"`
	} `json:"output"`
	Usage struct {
		Cost *struct {
			TotalCost *float64 `json:"total_cost"`
		} `json:"cost"`
		ToolCallsDetails map[string]struct {
			Invocation int `json:"invocation"`
		} `json:"tool_calls_details"`
	} `json:"usage"`
}

// perplexitySearchResult is one page of a search_results item or of the Search API.
type perplexitySearchResult struct {
	Title       string `json:"title"`
	URL         string `json:"url"`
	Date        string `json:"date"` // may be null or absent
	LastUpdated string `json:"last_updated"`
	Snippet     string `json:"snippet"`
}

func (e *perplexity) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, &Error{Kind: Auth, Engine: e.id, Message: "no API key configured"}
	}
	body, err := e.send(ctx, responses.PerplexityAgent, e.hc, e.model, e.request(q))
	if err != nil {
		return nil, e.sendError(err)
	}
	return e.parse(q, [][]byte{body})
}

// request is the Agent API call for q.
func (e *perplexity) request(q Query) perplexityAgentRequest {
	tool := perplexityAgentTool{Type: "web_search"}
	if f := perplexityFilter(q); f.SearchDomainFilter != nil || f.SearchRecencyFilter != "" || f.SearchLanguageFilter != nil {
		tool.Filters = &f
	}
	if c := perplexityCountry(q); c != "" {
		tool.UserLocation = &perplexityLocation{Country: c}
	}
	return perplexityAgentRequest{Preset: e.preset, Model: e.model, Input: q.Query, Instructions: groundedAInstructions(q), Tools: []perplexityAgentTool{tool}}
}

// perplexityFilter is q's filters as both Perplexity APIs take them: the domains
// (allowed ones as they are, or blocked ones prefixed "-": one mode at a time and at
// most 20 entries, the shared normalization enforcing whatever did not fit), the
// recency window and the ISO 639-1 code of the language ("zh-CN" → "zh").
func perplexityFilter(q Query) perplexityFilters {
	f := perplexityFilters{SearchRecencyFilter: recencyUnit[q.Recency]}
	if len(q.AllowedDomains) > 0 {
		f.SearchDomainFilter = q.AllowedDomains[:min(len(q.AllowedDomains), perplexityMaxDomains)]
	} else {
		for _, d := range q.BlockedDomains[:min(len(q.BlockedDomains), perplexityMaxDomains)] {
			f.SearchDomainFilter = append(f.SearchDomainFilter, "-"+d)
		}
	}
	if lang, _, _ := strings.Cut(strings.TrimSpace(q.Language), "-"); len(lang) == 2 {
		f.SearchLanguageFilter = []string{strings.ToLower(lang)}
	}
	return f
}

// perplexityCountry is q's country as both Perplexity APIs take it, "" unless a
// two-letter code.
func perplexityCountry(q Query) string {
	if len(q.Country) != 2 {
		return ""
	}
	return strings.ToUpper(q.Country)
}

// parse reads an Agent API answer.
func (e *perplexity) parse(q Query, bodies [][]byte) (*Result, error) {
	body, err := classicBody(&e.client, bodies)
	if err != nil {
		return nil, err
	}
	var extra perplexityAgentExtra
	extraErr := decode(&e.client, body, &extra)
	if extraErr == nil && extra.Error != nil && extra.Output == nil {
		return nil, openrouterInBand(&e.client, extra.Error, body) // an error answered with 200
	}
	a, err := responses.Model.DecodeResponse(body)
	if err != nil {
		return nil, &Error{Kind: Decode, Engine: e.id, Message: "reading the answer: " + redact.Truncate(err.Error(), 200)}
	}
	if extraErr != nil {
		return nil, extraErr
	}
	res := &Result{Usage: Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	var p pages
	for _, it := range extra.Output {
		if it.Type != "search_results" {
			continue
		}
		res.Usage.Searches++
		for _, r := range it.Results {
			p.add(perplexityHit(r))
		}
	}
	var summary []string
	for _, part := range a.Content {
		if part.Kind != wire.PartText {
			continue
		}
		text := part.Text
		if len(part.Citations) > 0 {
			var m marks
			for _, c := range part.Citations {
				if c.URL != "" {
					m.add(CharToByte(part.Text, c.End), p.cite(Hit{Title: c.Title, URL: c.URL}))
				}
			}
			text = m.into(part.Text)
		}
		if strings.TrimSpace(text) != "" {
			summary = append(summary, text)
		}
	}
	res.Summary = strings.Join(summary, "\n\n")
	if reason, ok := strings.CutPrefix(a.StopDetail, "incomplete"); ok {
		res.partialf("Perplexity's answer is incomplete (%s)", cmp.Or(strings.TrimPrefix(reason, ": "), "unknown reason"))
	}
	// The answer's own [n] markers (when it has no annotations) number the pages in
	// the order listed, as the sources are: no page is dropped from them.
	res.Citation.Sources = sourcesOf(p.hits)
	res.Hits = p.hits
	if d, ok := extra.Usage.ToolCallsDetails["web_search"]; ok && d.Invocation > 0 {
		res.Usage.Searches = d.Invocation
	}
	res.Usage.Searches = max(res.Usage.Searches, 1)
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	if c := extra.Usage.Cost; c != nil && c.TotalCost != nil {
		res.Usage.CostUSD = *c.TotalCost
	}
	if len(q.AllowedDomains) > perplexityMaxDomains {
		res.warnf("Perplexity takes at most %d domains: only the first %d allowed domains were searched", perplexityMaxDomains, perplexityMaxDomains)
	}
	return res, nil
}

// perplexityHit is a search result as a hit, dated by its publication date or else
// its last update.
func perplexityHit(r perplexitySearchResult) Hit {
	return Hit{Title: oneLine(r.Title), URL: r.URL, Snippet: clipSnippet(oneLine(r.Snippet)), Published: parseDate(cmp.Or(r.Date, r.LastUpdated))}
}
