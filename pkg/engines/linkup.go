package engines

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"
)

// linkup is the Linkup search API (POST {base}/v1/search, bearer key, default base
// https://api.linkup.so) asked for outputType searchResults: ranked pages, each
// {type:"text", name, url, content} (image results are skipped).
//
// Options: {"depth": "standard"|"deep"|"fast", "usdPerEUR": <rate>}. Depth standard
// (the default) searches once; deep keeps searching until it has enough, for tens of
// seconds; fast is Linkup's keyword-only beta.
//
// Count (maxResults), the domain filters (includeDomains, excludeDomains) and recency
// (fromDate, the window's first day) are request fields; language and country are
// not. Pricing: Linkup lists its prices in euros, €0.005 per standard search and €0.05
// per deep one (fast is priced as standard); the cost in USD is that times usdPerEUR
// (default 1), unless costPerSearchUSD is configured.
type linkup struct {
	client
	opts linkupOptions
}

type linkupOptions struct {
	Depth     string  `json:"depth,omitempty"`
	USDPerEUR float64 `json:"usdPerEUR,omitempty"`
}

// linkupEUR is Linkup's list price per search by depth, in euros.
var linkupEUR = map[string]float64{"standard": 0.005, "fast": 0.005, "deep": 0.05}

func newLinkup(cfg Config, hc *http.Client) (Engine, error) {
	e := &linkup{client: newClient(cfg, hc, "https://api.linkup.so")}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	e.opts.Depth = cmp.Or(e.opts.Depth, "standard")
	eur, ok := linkupEUR[e.opts.Depth]
	if !ok {
		return nil, fmt.Errorf("engine %q: options.depth %q is not standard, deep or fast", cfg.ID, e.opts.Depth)
	}
	if e.opts.USDPerEUR < 0 {
		return nil, fmt.Errorf("engine %q: options.usdPerEUR must be positive", cfg.ID)
	}
	e.price = priceOf(cfg, eur*cmp.Or(e.opts.USDPerEUR, 1))
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true, BlockedDomains: true}
	return e, nil
}

type linkupRequest struct {
	Q              string   `json:"q"`
	Depth          string   `json:"depth"`
	OutputType     string   `json:"outputType"`
	MaxResults     int      `json:"maxResults,omitempty"`
	IncludeDomains []string `json:"includeDomains,omitempty"`
	ExcludeDomains []string `json:"excludeDomains,omitempty"`
	FromDate       string   `json:"fromDate,omitempty"`
}

type linkupResponse struct {
	Results []struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
}

func (e *linkup) Search(ctx context.Context, q Query) (*Result, error) {
	req := linkupRequest{Q: q.Query, Depth: e.opts.Depth, OutputType: "searchResults", MaxResults: cmp.Or(q.Count, DefaultCount),
		IncludeDomains: q.AllowedDomains, ExcludeDomains: q.BlockedDomains, FromDate: q.Recency.since(time.Now(), time.DateOnly)}
	return e.searchOnce(ctx, q, request{path: "/v1/search", header: bearer(e.key), body: req}, e.parse)
}

func (e *linkup) parse(_ Query, bodies [][]byte) (*Result, error) {
	var resp linkupResponse
	if err := decodeClassic(&e.client, bodies, &resp); err != nil {
		return nil, err
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}}
	for _, r := range resp.Results {
		if r.Type != "" && r.Type != "text" {
			continue
		}
		res.Hits = append(res.Hits, Hit{Title: oneLine(r.Name), URL: r.URL, Snippet: clipSnippet(oneLine(r.Content))})
	}
	return res, nil
}
