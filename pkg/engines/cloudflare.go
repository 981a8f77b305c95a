package engines

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// cloudflare is the Cloudflare Web Search API (POST
// {base}/client/v4/accounts/{accountId}/ai/websearch/, a Cloudflare API token as the
// bearer key, default base https://api.cloudflare.com), which runs through an AI
// Gateway and answers from the provider the request names: Ceramic (its own index,
// the default), Exa or Linkup. The answer is Cloudflare's v4 envelope, {success,
// errors, messages, result}, whose result lists the pages' titles, URLs and
// descriptions.
//
// Options: {"accountId": "<account>" (required), "provider": "ceramic"|"exa"|"linkup",
// "gateway": "<gateway id>" (default "default")}.
//
// Count is the request's limit; the API takes no domain, recency, language or country
// filter, so the shared normalization applies the domain filters and warns about the
// rest. Pricing: each search is billed at the provider's list price, $0.25 per 1,000
// requests for Ceramic; Exa and Linkup at their own list prices ($0.007 and $0.005 per
// search here), or the configured costPerSearchUSD.
type cloudflare struct {
	client
	opts cloudflareOptions
}

type cloudflareOptions struct {
	AccountID string `json:"accountId"`
	Provider  string `json:"provider,omitempty"`
	Gateway   string `json:"gateway,omitempty"`
}

// cloudflarePrice is the list price of one search by provider, in USD.
var cloudflarePrice = map[string]float64{"ceramic": 0.00025, "exa": 0.007, "linkup": 0.005}

// cloudflareMaxLimit is the most results one request asks for.
const cloudflareMaxLimit = 20

func newCloudflare(cfg Config, hc *http.Client) (Engine, error) {
	e := &cloudflare{client: newClient(cfg, hc, "https://api.cloudflare.com")}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	if strings.TrimSpace(e.opts.AccountID) == "" {
		return nil, fmt.Errorf("engine %q: options.accountId is required (the Cloudflare account the search runs in)", cfg.ID)
	}
	e.opts.Provider = cmp.Or(e.opts.Provider, "ceramic")
	fee, ok := cloudflarePrice[e.opts.Provider]
	if !ok {
		return nil, fmt.Errorf("engine %q: options.provider %q is not ceramic, exa or linkup", cfg.ID, e.opts.Provider)
	}
	e.opts.Gateway = cmp.Or(e.opts.Gateway, "default")
	e.price = priceOf(cfg, fee)
	e.caps = Capabilities{Count: true}
	return e, nil
}

type cloudflareRequest struct {
	Query    string `json:"query"`
	Provider string `json:"provider"`
	Limit    int    `json:"limit"`
	Options  struct {
		Gateway struct {
			ID string `json:"id"`
		} `json:"gateway"`
	} `json:"options"`
}

type cloudflareResponse struct {
	Success bool `json:"success"`
	Errors  []struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"errors"`
	Result *struct {
		Results []struct {
			Title       string `json:"title"`
			URL         string `json:"url"`
			Description string `json:"description"`
		} `json:"results"`
	} `json:"result"`
}

func (e *cloudflare) Search(ctx context.Context, q Query) (*Result, error) {
	req := cloudflareRequest{Query: q.Query, Provider: e.opts.Provider, Limit: min(cmp.Or(q.Count, DefaultCount), cloudflareMaxLimit)}
	req.Options.Gateway.ID = e.opts.Gateway
	path := "/client/v4/accounts/" + url.PathEscape(e.opts.AccountID) + "/ai/websearch/"
	return e.searchOnce(ctx, q, request{path: path, header: bearer(e.key), body: req}, e.parse)
}

func (e *cloudflare) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp cloudflareResponse
	if err := decodeClassic(&e.client, bodies, &resp); err != nil {
		return nil, err
	}
	if !resp.Success || resp.Result == nil {
		msg := "the answer has no result"
		if len(resp.Errors) > 0 {
			msg = fmt.Sprintf("Cloudflare error %d: %s", resp.Errors[0].Code, redact.Truncate(resp.Errors[0].Message, 200))
		}
		return nil, &Error{Kind: Decode, Engine: e.id, Message: e.redact(msg)}
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}}
	for _, r := range resp.Result.Results {
		res.Hits = append(res.Hits, Hit{Title: oneLine(r.Title), URL: r.URL, Snippet: clipSnippet(oneLine(r.Description))})
	}
	if q.Count > cloudflareMaxLimit {
		res.warnf("Cloudflare Web Search returns at most %d results", cloudflareMaxLimit)
	}
	return res, nil
}
