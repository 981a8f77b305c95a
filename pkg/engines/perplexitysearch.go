package engines

import (
	"cmp"
	"context"
	"net/http"
)

// perplexitySearch is Perplexity's Search API (POST {base}/search, bearer key,
// default base https://api.perplexity.ai): ranked pages, no model-written answer.
//
// Count (max_results, at most 20), the domain filters (search_domain_filter, one mode
// at a time, at most 20 entries, blocked ones prefixed "-"), recency
// (search_recency_filter), language (search_language_filter) and country are request
// fields. Pricing: $5 per 1,000 requests, so $0.005 per search unless
// costPerSearchUSD says otherwise.
type perplexitySearch struct {
	client
}

// perplexitySearchMax is the Search API's ceiling on max_results (docs).
const perplexitySearchMax = 20

func newPerplexitySearch(cfg Config, hc *http.Client) (Engine, error) {
	e := &perplexitySearch{client: newClient(cfg, hc, "https://api.perplexity.ai")}
	e.price = priceOf(cfg, 0.005)
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true, BlockedDomains: true, Language: true, Country: true}
	return e, nil
}

type perplexitySearchRequest struct {
	Query      string `json:"query"`
	MaxResults int    `json:"max_results"`
	perplexityFilters
	Country string `json:"country,omitempty"`
}

type perplexitySearchResponse struct {
	Results []perplexitySearchResult `json:"results"`
}

func (e *perplexitySearch) Search(ctx context.Context, q Query) (*Result, error) {
	req := perplexitySearchRequest{Query: q.Query, MaxResults: min(cmp.Or(q.Count, DefaultCount), perplexitySearchMax),
		perplexityFilters: perplexityFilter(q), Country: perplexityCountry(q)}
	return e.searchOnce(ctx, q, request{path: "/search", header: bearer(e.key), body: req}, e.parse)
}

func (e *perplexitySearch) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp perplexitySearchResponse
	if err := decodeClassic(&e.client, bodies, &resp); err != nil {
		return nil, err
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}}
	for _, r := range resp.Results {
		res.Hits = append(res.Hits, perplexityHit(r))
	}
	if q.Count > perplexitySearchMax {
		res.warnf("Perplexity's Search API returns at most %d results", perplexitySearchMax)
	}
	if len(q.AllowedDomains) > perplexityMaxDomains || len(q.AllowedDomains) == 0 && len(q.BlockedDomains) > perplexityMaxDomains {
		res.warnf("Perplexity takes at most %d domains: the rest were applied to the results", perplexityMaxDomains)
	}
	return res, nil
}
