package engines

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Exa is the Exa search API (POST /search, key in the x-api-key header; camelCase JSON).
//
// Count (numResults), the domain filters (includeDomains, excludeDomains) and recency
// (startPublishedDate, the window's start) are Exa parameters; hits outside the domain
// filters are still dropped, with a warning, because Exa has been seen to return
// excluded domains. Exa takes no language or country, so those are warned about by
// the shared normalization.
//
// Each hit's snippet is its highlights (two sentences each are asked for), else its
// summary, else the start of its text.
//
// Options: {"type": one of exaTypes}, default auto. Exa ignores the crawl-date filters
// (startCrawlDate, endCrawlDate) without a word, so a configuration that sets them is
// refused rather than run weaker than it reads; the engine reads no retired response
// field (resolvedSearchType, highlightScores).
//
// Pricing: the response's costDollars.total when present; otherwise $0.007 per search
// (the auto search list price), or the configured costPerSearchUSD.
type exa struct {
	client
	opts exaOptions
}

type exaOptions struct {
	Type string `json:"type,omitempty"`
	// StartCrawlDate and EndCrawlDate are read only to refuse them.
	StartCrawlDate string `json:"startCrawlDate,omitempty"`
	EndCrawlDate   string `json:"endCrawlDate,omitempty"`
}

// exaTypes are the search types Exa documents.
var exaTypes = []string{"auto", "instant", "fast", "deep", "deep-reasoning", "lite", "neural", "keyword"}

func newExa(cfg Config, hc *http.Client) (Engine, error) {
	e := &exa{client: newClient(cfg, hc, "https://api.exa.ai")}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	if e.opts.StartCrawlDate != "" || e.opts.EndCrawlDate != "" {
		return nil, fmt.Errorf("engine %q: options.startCrawlDate and endCrawlDate are retired: Exa ignores them without an error, so the search would not be limited as configured (use recency, which sets startPublishedDate)", cfg.ID)
	}
	e.opts.Type = cmp.Or(e.opts.Type, "auto")
	if !slices.Contains(exaTypes, e.opts.Type) {
		return nil, fmt.Errorf("engine %q: options.type %q is not an Exa search type (%s)", cfg.ID, e.opts.Type, strings.Join(exaTypes, ", "))
	}
	e.price = priceOf(cfg, 0.007)
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true, BlockedDomains: true}
	return e, nil
}

type exaRequest struct {
	Query              string      `json:"query"`
	Type               string      `json:"type"`
	NumResults         int         `json:"numResults"`
	IncludeDomains     []string    `json:"includeDomains,omitempty"`
	ExcludeDomains     []string    `json:"excludeDomains,omitempty"`
	StartPublishedDate string      `json:"startPublishedDate,omitempty"`
	Contents           exaContents `json:"contents"`
}

type exaContents struct {
	Highlights struct {
		NumSentences int `json:"numSentences"`
	} `json:"highlights"`
}

type exaResponse struct {
	Results []struct {
		Title         string   `json:"title"`
		URL           string   `json:"url"`
		PublishedDate string   `json:"publishedDate"`
		Highlights    []string `json:"highlights"`
		Text          string   `json:"text"`
		Summary       string   `json:"summary"`
	} `json:"results"`
	CostDollars *struct {
		Total *float64 `json:"total"`
	} `json:"costDollars"`
}

func (e *exa) Search(ctx context.Context, q Query) (*Result, error) {
	req := exaRequest{
		Query:              q.Query,
		Type:               e.opts.Type,
		NumResults:         cmp.Or(q.Count, DefaultCount),
		IncludeDomains:     q.AllowedDomains,
		ExcludeDomains:     q.BlockedDomains,
		StartPublishedDate: q.Recency.since(time.Now(), "2006-01-02T15:04:05.000Z"),
	}
	req.Contents.Highlights.NumSentences = 2
	return e.searchOnce(ctx, q, request{path: "/search", header: header("x-api-key", e.key), body: req}, e.parse)
}

func (e *exa) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp exaResponse
	if err := decodeClassic(&e.client, bodies, &resp); err != nil {
		return nil, err
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}}
	if resp.CostDollars != nil && resp.CostDollars.Total != nil && *resp.CostDollars.Total >= 0 {
		res.Usage.CostUSD = *resp.CostDollars.Total
	}
	now := time.Now()
	for _, r := range resp.Results {
		h := Hit{Title: oneLine(r.Title), URL: r.URL, Published: readDate(r.PublishedDate, now)}
		h.Snippet = clipSnippet(exaSnippet(r.Highlights, r.Summary, r.Text))
		res.Hits = append(res.Hits, h)
	}
	return res, nil
}

// exaSnippet picks a hit's snippet: its highlights joined, else its summary, else its
// text (cut by the caller).
func exaSnippet(highlights []string, summary, text string) string {
	var parts []string
	for _, h := range highlights {
		if h = oneLine(h); h != "" {
			parts = append(parts, h)
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, " … ")
	}
	if s := oneLine(summary); s != "" {
		return s
	}
	if n := 4 * SnippetBudget; len(text) > n {
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n] // a bounded prefix, cut on a rune boundary; clipSnippet cuts it again
	}
	return oneLine(text)
}
