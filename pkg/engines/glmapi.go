package engines

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
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
	opts glmOptions
}

func newGLMAPI(cfg Config, hc *http.Client) (Engine, error) {
	e := &glmAPI{client: newClient(cfg, hc, glmDefaultBase)}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	e.opts.SearchEngine = cmp.Or(e.opts.SearchEngine, "search_std")
	e.opts.ContentSize = cmp.Or(e.opts.ContentSize, "medium")
	e.price = priceOf(cfg, glmSearchPrice(e.opts.SearchEngine))
	// As glm-chat, recency, count (1–50) and one allowed domain are request fields.
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true}
	return e, nil
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
	SearchResult []nativechat.GLMItem `json:"search_result"`
	Error        *glmErrorBody        `json:"error"`
}

func (e *glmAPI) Search(ctx context.Context, q Query) (*Result, error) {
	req := glmAPIRequest{
		SearchQuery:         glmTruncateQuery(q.Query),
		SearchEngine:        e.opts.SearchEngine,
		Count:               q.Count,
		SearchDomainFilter:  glmDomainFilter(q),
		SearchRecencyFilter: string(q.Recency),
		ContentSize:         e.opts.ContentSize,
	}
	return e.searchOnce(ctx, q, request{path: "/web_search", header: bearer(e.key), body: req}, e.parse)
}

func (e *glmAPI) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp glmAPIResponse
	if err := decode(&e.client, bodies[0], &resp); err != nil {
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

// The parts both GLM kinds share.

// glmOptions are the options of both GLM kinds.
type glmOptions struct {
	SearchEngine string `json:"searchEngine,omitempty"`
	ContentSize  string `json:"contentSize,omitempty"`
	SearchPrompt string `json:"searchPrompt,omitempty"`
	Thinking     string `json:"thinking,omitempty"`
}

// glmDefaultBase is Zhipu's mainland endpoint; both GLM kinds default to it.
const glmDefaultBase = "https://open.bigmodel.cn/api/paas/v4"

// glmUSDPerCNY converts Zhipu's and Moonshot's yuan list prices for accounting: a fixed,
// documented rate (≈ the 2025–2026 average) rather than a live one, so costs are
// reproducible. Override per engine with costPerSearchUSD.
const glmUSDPerCNY = 0.14

// glmMaxQuery is the Web Search API's documented limit on search_query, in characters.
const glmMaxQuery = 70

// glmEngineCNY is Zhipu's price per search call by search engine, in yuan (docs).
// Engines not listed (Z.AI's search-prime, search_pro_jina, new ones) are priced as
// search_pro.
var glmEngineCNY = map[string]float64{
	"search_std":       0.01,
	"search_pro":       0.03,
	"search_pro_sogou": 0.05,
	"search_pro_quark": 0.05,
}

// glmSearchPrice is the USD list price of one search with engine.
func glmSearchPrice(engine string) float64 {
	return cmp.Or(glmEngineCNY[engine], glmEngineCNY["search_pro"]) * glmUSDPerCNY
}

// glmErrorBody is Zhipu's error envelope {"error":{"code","message"}}; code is usually
// a string ("1302") but numbers have been seen.
type glmErrorBody struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

// glmHit turns a search item into a hit: the "（发布时间：…）" / "(Published: …)" title
// suffix becomes Published (it carries the time, publish_date only the day).
func glmHit(it nativechat.GLMItem) Hit {
	title, published := nativechat.GLMTitle(it.Title)
	h := Hit{Title: title, URL: it.Link, Source: it.Media, Snippet: it.Content, Published: published}
	if h.Published.IsZero() {
		h.Published = parseDate(it.PublishDate)
	}
	return h
}

// glmTruncateQuery cuts q to the Web Search API's 70-character limit on a rune
// boundary.
func glmTruncateQuery(q string) string { return q[:CharToByte(q, glmMaxQuery)] }

// glmDomainFilter is the one domain Zhipu's search_domain_filter takes: the first
// allowed domain.
func glmDomainFilter(q Query) string {
	if len(q.AllowedDomains) == 0 {
		return ""
	}
	return q.AllowedDomains[0]
}

// glmCheckDomains warns when only the first of several allowed domains was searched
// (the shared normalization then drops hits outside the allowed domains).
func glmCheckDomains(res *Result, q Query) {
	if len(q.AllowedDomains) > 1 {
		res.warnf("Zhipu's domain filter takes one domain: only %s was searched, not %s", q.AllowedDomains[0], strings.Join(q.AllowedDomains[1:], ", "))
	}
}

// glmError turns a Zhipu error envelope that arrived with HTTP 200 into an *Error
// (glmCodeKind; any other code is a bad request).
func glmError(c *client, b *glmErrorBody) *Error {
	code := strings.Trim(string(b.Code), `" `)
	msg := b.Message
	if code != "" && code != "null" {
		msg = code + ": " + msg
	}
	return &Error{Engine: c.id, Kind: cmp.Or(glmCodeKind(code), BadRequest), Message: c.redact(redact.Truncate(msg, 300))}
}

// glmCodeKind is the kind of a Zhipu error code: 1302/1303/1305 rate limits, 1113 and
// 1304 (balance, daily limit) quota, 1000–1004 and 1100–1121 credentials and account
// state, 5xx unavailable, any other code of Zhipu's (1301 content filter, 12xx
// parameter errors) a bad request; "" for a code that is not Zhipu's.
func glmCodeKind(code string) ErrorKind {
	n, err := strconv.Atoi(code)
	switch {
	case err != nil:
		return ""
	case n == 1302 || n == 1303 || n == 1305:
		return RateLimited
	case n == 1113 || n == 1304:
		return Quota
	case n >= 1000 && n <= 1004, n >= 1100 && n <= 1121:
		return Auth
	case n >= 500 && n < 600:
		return Unavailable
	case n >= 1000:
		return BadRequest
	}
	return ""
}
