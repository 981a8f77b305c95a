package engines

import (
	"context"
	"net/http"
	"unicode/utf8"
)

// glmAPI is Zhipu's standalone Web Search API (POST {base}/web_search, bearer key,
// same default base as glm-chat): a classic search API that returns search_result[]
// and no answer (WIRE_FORMATS.md §4b).
//
// Options: {"searchEngine": "search_std", "contentSize": "medium"}. search_std is the
// default because a bare result list is the cheap path (¥0.01 a call, a third of
// search_pro) and it is the engine of the real recording; set search_pro (or
// search_pro_sogou, search_pro_quark) for better recall. Queries longer than the
// API's 70 characters are cut on a character boundary, with a warning.
type glmAPI struct {
	client
	opts  glmOptions
	price float64
}

func newGLMAPI(cfg Config, hc *http.Client) (Engine, error) {
	e := &glmAPI{client: newClient(cfg, hc, glmDefaultBase)}
	if err := cfg.options(&e.opts); err != nil {
		return nil, err
	}
	if e.opts.SearchEngine == "" {
		e.opts.SearchEngine = "search_std"
	}
	if e.opts.ContentSize == "" {
		e.opts.ContentSize = "medium"
	}
	e.price = cfg.price(glmSearchPrice(e.opts.SearchEngine))
	return e, nil
}

func (e *glmAPI) Name() string { return e.id }

// Capabilities: as glm-chat, recency, count (1–50) and one allowed domain are request
// fields.
func (e *glmAPI) Capabilities() Capabilities {
	return Capabilities{Recency: true, Count: true, AllowedDomains: true}
}

type glmAPIRequest struct {
	SearchQuery         string `json:"search_query"`
	SearchEngine        string `json:"search_engine"`
	SearchIntent        bool   `json:"search_intent"` // false: always search, skip the intent model
	Count               int    `json:"count"`
	SearchDomainFilter  string `json:"search_domain_filter,omitempty"`
	SearchRecencyFilter string `json:"search_recency_filter"`
	ContentSize         string `json:"content_size"`
}

type glmAPIResponse struct {
	ID           string          `json:"id"`
	SearchResult []glmSearchItem `json:"search_result"`
	Error        *glmErrorBody   `json:"error"`
}

func (e *glmAPI) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, &Error{Kind: Auth, Engine: e.id, Message: "no API key configured"}
	}
	req := glmAPIRequest{
		SearchQuery:         glmTruncateQuery(q.Query),
		SearchEngine:        e.opts.SearchEngine,
		Count:               q.Count,
		SearchDomainFilter:  glmDomainFilter(q),
		SearchRecencyFilter: string(q.Recency),
		ContentSize:         e.opts.ContentSize,
	}
	body, _, err := e.do(ctx, request{path: "/web_search", header: bearer(e.key), body: req})
	if err != nil {
		return nil, err
	}
	return e.parse(q, [][]byte{body})
}

func (e *glmAPI) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp glmAPIResponse
	if err := e.decode(bodies[0], &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil && resp.SearchResult == nil {
		return nil, glmError(&e.client, resp.Error)
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}}
	if n := utf8.RuneCountInString(q.Query); n > glmMaxQuery {
		res.warnf("Zhipu's search takes at most %d characters: the query (%d) was cut to %q", glmMaxQuery, n, glmTruncateQuery(q.Query))
	}
	for _, it := range resp.SearchResult {
		res.Hits = append(res.Hits, glmHit(it))
	}
	glmCheckDomains(res, q)
	return res, nil
}
