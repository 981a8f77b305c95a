package engines

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// anthropic is Anthropic's Messages API with the server-side web search tool, an
// adapter over the Messages model codec (wire.AnthropicModel, grounded.go): default
// base https://api.anthropic.com, default model claude-sonnet-4-5.
//
// Claude runs the searches itself (server calls and their results in the answer) and
// answers in text whose citations name the result they rest on. Citations have no
// offsets, so a marker goes after each cited text part; source n is the n-th distinct
// result, in the order the searches returned them (a cited page that is not among the
// results is appended). Uncited results past the query's count are left out of the
// sources, so a long research turn does not flood the text the main model reads; they
// remain hits. A turn that pauses (pause_turn) is resumed by the model caller; when a
// resumption fails, the answer so far is the result, with a warning.
//
// Options:
//
//	{"toolVersion": "web_search_20250305"}  the tool type; "web_search_20260209" and later
//	                                        (dynamic filtering) are sent with
//	                                        allowed_callers ["direct"] so that models
//	                                        without programmatic tool calling accept it
//	{"maxUses": 5}                          searches Claude may run per request (default 5,
//	                                        a cost bound: $0.05)
//	{"maxTokens": 2048}                     max_tokens of each request (default 2048)
//
// Filters: allowed or blocked domains and the country (user_location) are applied by
// Anthropic. The tool takes allowed_domains or blocked_domains, not both: with both,
// allowed_domains is sent and blocked_domains is applied to the results afterwards,
// with a warning. Pricing: $10 per 1,000 searches (errored searches are not billed), so
// the default cost is $0.01 per search; tokens are reported in Usage, not priced.
type anthropic struct {
	grounded
	opts anthropicOptions
	now  func() time.Time
}

type anthropicOptions struct {
	ToolVersion string `json:"toolVersion,omitempty"`
	MaxUses     int    `json:"maxUses,omitempty"`
	MaxTokens   int    `json:"maxTokens,omitempty"`
}

var anthropicToolRE = regexp.MustCompile(`^web_search_\d{8}$`)

func newAnthropic(cfg Config, hc *http.Client) (Engine, error) {
	e := &anthropic{grounded: newGrounded(cfg, hc, wire.AnthropicModel, "https://api.anthropic.com", "", "claude-sonnet-4-5"), now: time.Now}
	if err := cfg.options(&e.opts); err != nil {
		return nil, err
	}
	if e.opts.ToolVersion == "" {
		e.opts.ToolVersion = "web_search_20250305"
	}
	if !anthropicToolRE.MatchString(e.opts.ToolVersion) {
		return nil, fmt.Errorf("engine %q: options.toolVersion %q is not a web_search_YYYYMMDD tool type", cfg.ID, e.opts.ToolVersion)
	}
	e.opts.MaxUses = cmpOr(e.opts.MaxUses, 5)
	e.opts.MaxTokens = cmpOr(e.opts.MaxTokens, 2048)
	if e.opts.MaxUses < 1 || e.opts.MaxTokens < 1 {
		return nil, fmt.Errorf("engine %q: options.maxUses and options.maxTokens must be positive", cfg.ID)
	}
	e.price = cfg.price(0.01)
	return e, nil
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Capabilities: domains (allowed or blocked) and country; see the type's comment.
func (e *anthropic) Capabilities() Capabilities {
	return Capabilities{AllowedDomains: true, BlockedDomains: true, Country: true}
}

func (e *anthropic) Search(ctx context.Context, q Query) (*Result, error) {
	so := &llm.SearchOptions{Tool: e.opts.ToolVersion, MaxUses: e.opts.MaxUses, AllowedDomains: q.AllowedDomains}
	if len(q.AllowedDomains) == 0 {
		so.BlockedDomains = q.BlockedDomains
	}
	if len(q.Country) == 2 {
		so.Country = q.Country
	}
	answer, err := e.ask(ctx, q, so, e.opts.MaxTokens)
	var ee *Error
	if errors.As(err, &ee) && ee.Kind == BadRequest && strings.Contains(ee.Message, "credit balance") {
		ee.Kind = Quota
	}
	if err != nil && answer != nil && ctx.Err() == nil {
		// A failed continuation does not void the searches already paid for.
		if res, perr := e.result(q, answer); perr == nil {
			res.warnf("continuing Claude's paused turn failed (%s); this is the answer so far", AsError(e.id, err).Kind)
			return res, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return e.result(q, answer)
}

func (e *anthropic) parse(q Query, bodies [][]byte) (*Result, error) {
	answer, err := e.decodeAll(bodies)
	if err != nil {
		return nil, err
	}
	return e.result(q, answer)
}

// result reads one answer (continuations joined) as search results.
func (e *anthropic) result(q Query, a *wire.Response) (*Result, error) {
	res := &Result{Usage: Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	// Pass 1: the results of every search, in order, one source per distinct URL.
	var results []wire.Source
	index := map[string]int{} // URL -> 1-based source number
	var failures []string
	searchesOK := 0
	for _, p := range a.Content {
		if p.Kind != wire.PartServerResult {
			continue
		}
		if p.Search.Error != nil {
			if p.Search.Error.Code != "" {
				failures = append(failures, p.Search.Error.Code)
			}
			continue
		}
		searchesOK++
		for _, r := range p.Search.Sources {
			if r.URL == "" || index[r.URL] > 0 {
				continue
			}
			results = append(results, r)
			index[r.URL] = len(results)
			res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{Title: r.Title, URI: r.URL}})
		}
	}
	if len(results) == 0 && len(failures) > 0 {
		return nil, e.toolError(failures[len(failures)-1])
	}
	if len(failures) > 0 {
		res.warnf("%d of %d web searches failed (%s); the answer rests on the others", len(failures), len(failures)+searchesOK, strings.Join(failures, ", "))
	}

	// Pass 2: the answer. A run of uncited text right before a tool call is narration
	// ("Let me search for …"), not answer, and is left out.
	var text strings.Builder
	var citedOrder []int
	cited := map[int]bool{}
	snippet := map[int]string{}
	parts := a.Content
	for i := 0; i < len(parts); i++ {
		if parts[i].Kind != wire.PartText {
			continue
		}
		j, anyCited := i, false
		for ; j < len(parts) && (parts[j].Kind == wire.PartText || parts[j].Kind == wire.PartReasoning); j++ {
			anyCited = anyCited || len(parts[j].Citations) > 0
		}
		if !anyCited && j < len(parts) {
			i = j - 1 // narration before a tool call
			continue
		}
		for _, p := range parts[i:j] {
			if p.Kind != wire.PartText {
				continue
			}
			var nums []int
			for _, c := range p.Citations {
				if c.URL == "" {
					continue
				}
				n := index[c.URL]
				if n == 0 {
					res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{Title: c.Title, URI: c.URL}})
					n = len(res.Citation.Sources)
					index[c.URL] = n
				}
				nums = append(nums, n)
				if !cited[n] {
					cited[n] = true
					citedOrder = append(citedOrder, n)
				}
				if snippet[n] == "" && c.CitedText != "" {
					snippet[n] = html.UnescapeString(c.CitedText)
				}
			}
			t := groundedAInsert(p.Text, nil) // escapes any "[n]" Claude wrote itself
			body := strings.TrimRight(t, " \t\r\n")
			text.WriteString(body)
			text.WriteString(MarkerText(nums))
			text.WriteString(t[len(body):])
		}
		i = j - 1
	}
	res.Summary = text.String()
	if a.Paused {
		res.warnf("Claude had not finished searching when its turn was cut short; the answer may be incomplete")
	}

	// Hits: the cited pages first, in order of first citation, then the other results.
	now := e.now()
	hit := func(n int) Hit {
		s := res.Citation.Sources[n-1].Web
		h := Hit{Title: s.Title, URL: s.URI, Snippet: snippet[n]}
		if n <= len(results) && results[n-1].PageAge != "" {
			h.Published = readDate(results[n-1].PageAge, now) // "December 21, 2015" or "2 days ago"
		}
		return h
	}
	for _, n := range citedOrder {
		res.Hits = append(res.Hits, hit(n))
	}
	for n := 1; n <= len(results); n++ {
		if !cited[n] {
			res.Hits = append(res.Hits, hit(n))
		}
	}
	// Sources: uncited results past the wanted count are dropped (finish removes
	// sources without a URI and renumbers the markers).
	for n := q.Count + 1; n <= len(res.Citation.Sources); n++ {
		if !cited[n] {
			res.Citation.Sources[n-1].Web.URI = ""
		}
	}
	if len(q.AllowedDomains) > 0 && len(q.BlockedDomains) > 0 {
		res.warnf("Anthropic's web search takes allowed or blocked domains, not both: allowed_domains was sent and blocked_domains applied to the results afterwards")
	}
	res.Usage.Searches = searchesOK
	if a.Usage.WebSearches > 0 || (searchesOK > 0 && len(failures) > 0) {
		res.Usage.Searches = a.Usage.WebSearches // billed: failed searches are not
	}
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	return res, nil
}

// toolError turns the error code of a failed web search result into an *Error.
func (e *anthropic) toolError(code string) *Error {
	err := &Error{Kind: BadRequest, Engine: e.id, Message: "web search failed: " + code}
	switch code {
	case "too_many_requests":
		err.Kind = RateLimited
	case "unavailable":
		err.Kind = Unavailable
	}
	return err
}
