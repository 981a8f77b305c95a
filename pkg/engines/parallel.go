package engines

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// parallel is Parallel's Search API (POST {base}/v1/search, key in the x-api-key
// header, default base https://api.parallel.ai): the query goes as the objective and
// as the one keyword query of search_queries; the answer is ranked pages
// {url, title, publish_date, excerpts[]}.
//
// Options: {"mode": "turbo"|"fast"|"basic"|"advanced"}, default fast. An omitted mode
// means advanced to Parallel, at five times the price of fast, so the engine always
// sends one.
//
// Count (advanced_settings.max_results, at most 40), the domain filters and recency
// (advanced_settings.source_policy: include_domains, exclude_domains, after_date) are
// request fields; language and country are not. Pricing: $1 per 1,000 searches in
// turbo and fast mode, $5 per 1,000 in basic and advanced, or the configured
// costPerSearchUSD.
type parallel struct {
	client
	mode string
}

// parallelPrice is the list price of one search by mode, in USD.
var parallelPrice = map[string]float64{"turbo": 0.001, "fast": 0.001, "basic": 0.005, "advanced": 0.005}

// parallelMaxResults is the ceiling on max_results.
const parallelMaxResults = 40

func newParallel(cfg Config, hc *http.Client) (Engine, error) {
	var o struct {
		Mode string `json:"mode,omitempty"`
	}
	if err := optionsOf(cfg, &o); err != nil {
		return nil, err
	}
	e := &parallel{client: newClient(cfg, hc, "https://api.parallel.ai"), mode: cmp.Or(o.Mode, "fast")}
	fee, ok := parallelPrice[e.mode]
	if !ok {
		return nil, fmt.Errorf("engine %q: options.mode %q is not turbo, fast, basic or advanced", cfg.ID, e.mode)
	}
	e.price = priceOf(cfg, fee)
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true, BlockedDomains: true}
	return e, nil
}

type parallelRequest struct {
	Objective        string   `json:"objective"`
	SearchQueries    []string `json:"search_queries"`
	Mode             string   `json:"mode"`
	AdvancedSettings struct {
		MaxResults   int                   `json:"max_results"`
		SourcePolicy *parallelSourcePolicy `json:"source_policy,omitempty"`
	} `json:"advanced_settings"`
}

type parallelSourcePolicy struct {
	IncludeDomains []string `json:"include_domains,omitempty"`
	ExcludeDomains []string `json:"exclude_domains,omitempty"`
	AfterDate      string   `json:"after_date,omitempty"`
}

type parallelResponse struct {
	Results []struct {
		URL         string   `json:"url"`
		Title       string   `json:"title"`
		PublishDate string   `json:"publish_date"`
		Excerpts    []string `json:"excerpts"`
	} `json:"results"`
}

func (e *parallel) Search(ctx context.Context, q Query) (*Result, error) {
	req := parallelRequest{Objective: q.Query, SearchQueries: []string{q.Query}, Mode: e.mode}
	req.AdvancedSettings.MaxResults = min(cmp.Or(q.Count, DefaultCount), parallelMaxResults)
	sp := parallelSourcePolicy{IncludeDomains: q.AllowedDomains, ExcludeDomains: q.BlockedDomains, AfterDate: q.Recency.since(time.Now(), time.DateOnly)}
	if sp.IncludeDomains != nil || sp.ExcludeDomains != nil || sp.AfterDate != "" {
		req.AdvancedSettings.SourcePolicy = &sp
	}
	return e.searchOnce(ctx, q, request{path: "/v1/search", header: header("x-api-key", e.key), body: req}, e.parse)
}

func (e *parallel) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp parallelResponse
	if err := decodeClassic(&e.client, bodies, &resp); err != nil {
		return nil, err
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}}
	for _, r := range resp.Results {
		res.Hits = append(res.Hits, Hit{Title: oneLine(r.Title), URL: r.URL, Snippet: clipSnippet(oneLine(strings.Join(r.Excerpts, " … "))),
			Published: parseDate(r.PublishDate)})
	}
	if q.Count > parallelMaxResults {
		res.warnf("Parallel returns at most %d results", parallelMaxResults)
	}
	return res, nil
}
