package engines

import (
	"cmp"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
	anthropicapi "github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// anthropic is Anthropic's Messages API with the server-side web search tool, an
// adapter over the Messages model codec (pkg/llm/anthropic, grounded.go): default
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
}

type anthropicOptions struct {
	ToolVersion string `json:"toolVersion,omitempty"`
	MaxUses     int    `json:"maxUses,omitempty"`
	MaxTokens   int    `json:"maxTokens,omitempty"`
}

// anthropicToolErrors are the kinds of the error codes of a failed web search result
// that a retry can beat; any other code is a bad request.
var anthropicToolErrors = map[string]ErrorKind{"too_many_requests": RateLimited, "unavailable": Unavailable}

var anthropicToolRE = regexp.MustCompile(`^web_search_\d{8}$`)

func newAnthropic(cfg Config, hc *http.Client) (Engine, error) {
	e := &anthropic{}
	e.grounded = newGrounded(cfg, hc, anthropicapi.Model, "https://api.anthropic.com", "", "claude-sonnet-4-5", "Claude", e)
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	e.opts.ToolVersion = cmp.Or(e.opts.ToolVersion, "web_search_20250305")
	if !anthropicToolRE.MatchString(e.opts.ToolVersion) {
		return nil, fmt.Errorf("engine %q: options.toolVersion %q is not a web_search_YYYYMMDD tool type", cfg.ID, e.opts.ToolVersion)
	}
	e.opts.MaxUses = cmp.Or(e.opts.MaxUses, 5)
	e.opts.MaxTokens = cmp.Or(e.opts.MaxTokens, 2048)
	if e.opts.MaxUses < 1 || e.opts.MaxTokens < 1 {
		return nil, fmt.Errorf("engine %q: options.maxUses and options.maxTokens must be positive", cfg.ID)
	}
	e.price = priceOf(cfg, 0.01)
	e.caps = Capabilities{AllowedDomains: true, BlockedDomains: true, Country: true}
	return e, nil
}

func (e *anthropic) searchOptions(q Query) (*llm.SearchOptions, int) {
	so := &llm.SearchOptions{Tool: e.opts.ToolVersion, MaxUses: e.opts.MaxUses, AllowedDomains: q.AllowedDomains}
	if len(q.AllowedDomains) == 0 {
		so.BlockedDomains = q.BlockedDomains
	}
	if len(q.Country) == 2 {
		so.Country = q.Country
	}
	return so, e.opts.MaxTokens
}

// result reads an answer: the results of every search, in order, as the sources;
// the text parts that cite as the summary, a marker after each.
func (e *anthropic) result(q Query, a *wire.Response) (*Result, error) {
	res := &Result{Usage: Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	var p pages
	var failures []string
	searchesOK, now := 0, time.Now()
	for _, part := range a.Content {
		switch {
		case part.Kind != wire.PartServerResult:
		case part.Search.Error != nil && part.Search.Error.Code != "":
			failures = append(failures, part.Search.Error.Code)
		case part.Search.Error == nil:
			searchesOK++
			for _, r := range part.Search.Sources {
				if r.URL != "" { // page_age: "December 21, 2015" or "2 days ago"
					p.add(Hit{Title: r.Title, URL: r.URL, Published: readDate(r.PageAge, now)})
				}
			}
		}
	}
	if len(p.hits) == 0 && len(failures) > 0 {
		code := failures[len(failures)-1]
		return nil, &Error{Kind: cmp.Or(anthropicToolErrors[code], BadRequest), Engine: e.id, Message: "web search failed: " + code}
	}
	if len(failures) > 0 {
		res.partialf("%d of %d web searches failed (%s); the answer rests on the others", len(failures), len(failures)+searchesOK, strings.Join(failures, ", "))
	}
	res.Summary = e.summary(a.Content, &p)
	if a.Paused {
		res.partialf("Claude had not finished searching when its turn was cut short; the answer may be incomplete")
	}
	p.citedFirst(res, q.Count)
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

// summary is the answer's text with a marker after each text part that cites (its
// citations have no offsets), numbering a cited page that is not among the results
// after them and taking its first cited passage as the hit's snippet. A run of uncited
// text right before a tool call is narration ("Let me search for …"), not answer,
// and is left out.
func (e *anthropic) summary(parts []wire.Part, p *pages) string {
	var text strings.Builder
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
		for _, part := range parts[i:j] {
			if part.Kind != wire.PartText {
				continue
			}
			var m marks
			for _, c := range part.Citations {
				if c.URL == "" {
					continue
				}
				n := p.cite(Hit{Title: c.Title, URL: c.URL})
				m.add(len(strings.TrimRight(part.Text, " \t\r\n")), n)
				if h := &p.hits[n-1]; h.Snippet == "" {
					h.Snippet = html.UnescapeString(c.CitedText)
				}
			}
			text.WriteString(m.into(part.Text))
		}
		i = j - 1
	}
	return text.String()
}
