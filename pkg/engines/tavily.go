package engines

import (
	"cmp"
	"context"
	"net/http"
	"strings"
)

// Tavily is the Tavily search API (POST /search, bearer key).
//
// Options: {"searchDepth": "basic"|"advanced", "topic": "general"|"news"|"finance"}.
// Pricing: 1 credit per basic search, 2 per advanced; the default cost assumes
// $0.008 per credit (pay-as-you-go).
type tavily struct {
	client
	opts tavilyOptions
}

type tavilyOptions struct {
	SearchDepth string `json:"searchDepth,omitempty"`
	Topic       string `json:"topic,omitempty"`
}

func newTavily(cfg Config, hc *http.Client) (Engine, error) {
	e := &tavily{client: newClient(cfg, hc, "https://api.tavily.com")}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	e.opts.SearchDepth = cmp.Or(e.opts.SearchDepth, "basic")
	e.opts.Topic = cmp.Or(e.opts.Topic, "general")
	credits := 1.0
	if e.opts.SearchDepth == "advanced" {
		credits = 2
	}
	e.price = priceOf(cfg, 0.008*credits)
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true, BlockedDomains: true, Country: e.opts.Topic == "general"}
	return e, nil
}

type tavilyRequest struct {
	Query          string   `json:"query"`
	SearchDepth    string   `json:"search_depth"`
	Topic          string   `json:"topic"`
	MaxResults     int      `json:"max_results"`
	TimeRange      string   `json:"time_range,omitempty"`
	IncludeDomains []string `json:"include_domains,omitempty"`
	ExcludeDomains []string `json:"exclude_domains,omitempty"`
	Country        string   `json:"country,omitempty"`
}

type tavilyResponse struct {
	Results []struct {
		Title         string  `json:"title"`
		URL           string  `json:"url"`
		Content       string  `json:"content"`
		Score         float64 `json:"score"`
		PublishedDate string  `json:"published_date"`
	} `json:"results"`
}

func (e *tavily) Search(ctx context.Context, q Query) (*Result, error) {
	req := tavilyRequest{
		Query:          q.Query,
		SearchDepth:    e.opts.SearchDepth,
		Topic:          e.opts.Topic,
		MaxResults:     min(q.Count, 20), // Tavily's ceiling
		TimeRange:      recencyUnit[q.Recency],
		IncludeDomains: q.AllowedDomains,
		ExcludeDomains: q.BlockedDomains,
	}
	if e.opts.Topic == "general" && len(q.Country) == 2 {
		req.Country = countryName(q.Country)
	}
	return e.searchOnce(ctx, q, request{path: "/search", header: bearer(e.key), body: req}, e.parse)
}

func (e *tavily) parse(_ Query, bodies [][]byte) (*Result, error) {
	var resp tavilyResponse
	if err := decode(&e.client, bodies[0], &resp); err != nil {
		return nil, err
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}}
	for _, r := range resp.Results {
		res.Hits = append(res.Hits, Hit{Title: r.Title, URL: r.URL, Snippet: r.Content, Published: parseDate(r.PublishedDate)})
	}
	return res, nil
}

// tavilyCountries are the ISO codes Tavily's country parameter knows, by name.
var tavilyCountries = map[string]string{"US": "united states", "GB": "united kingdom", "UK": "united kingdom", "DE": "germany",
	"FR": "france", "CN": "china", "JP": "japan", "IN": "india", "CA": "canada", "AU": "australia", "BR": "brazil"}

// countryName is the name of a code in tavilyCountries, written in upper or lower
// case; "" for others, which the caller warns about.
func countryName(code string) string {
	if code != strings.ToUpper(code) && code != strings.ToLower(code) {
		return ""
	}
	return tavilyCountries[strings.ToUpper(code)]
}
