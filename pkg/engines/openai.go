package engines

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// openai is OpenAI's Responses API with the hosted web_search tool, an adapter over the
// Responses model codec (responses.Model, grounded.go): POST {base}/v1/responses
// with a bearer key; default base https://api.openai.com, default model gpt-5-mini
// (the cheapest current model that takes the tool with domain filters). The codec asks
// for the searched pages themselves (include: ["web_search_call.action.sources"]), does
// not store the response and leaves tool_choice "auto" (forcing the hosted tool is
// refused by some models: the recorded 400 "Tool choice 'web_search' not found").
//
// Options: {"searchContextSize": "low"|"medium"|"high"} (how much page text the tool
// feeds the model; a query's context_size overrides it; unset means OpenAI's default,
// medium) and {"toolType": "web_search"|"web_search_preview"} (the preview tool, which
// Azure OpenAI and older models take, has no domain filter; default web_search).
//
// Filters: allowed domains (filters.allowed_domains) and the country
// (user_location.country) are applied by OpenAI; the rest is left to the shared
// normalization. Pricing: $10 per 1,000 web search calls, so the default cost is $0.01
// per search (a search action, or tool_usage.web_search.num_requests when the response
// reports it); the tokens of the search context are reported in Usage, not priced.
type openai struct {
	grounded
	opts openaiOptions
}

type openaiOptions struct {
	SearchContextSize string `json:"searchContextSize,omitempty"`
	ToolType          string `json:"toolType,omitempty"`
}

func newOpenAI(cfg Config, hc *http.Client) (Engine, error) {
	e := &openai{}
	e.grounded = newGrounded(cfg, hc, responses.Model, "https://api.openai.com", "/v1", "gpt-5-mini", "OpenAI", e)
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	if !slices.Contains(contextSizes, e.opts.SearchContextSize) {
		return nil, fmt.Errorf("engine %q: options.searchContextSize %q is not low, medium or high", cfg.ID, e.opts.SearchContextSize)
	}
	if e.opts.ToolType = cmp.Or(e.opts.ToolType, "web_search"); e.opts.ToolType != "web_search" && e.opts.ToolType != "web_search_preview" {
		return nil, fmt.Errorf("engine %q: options.toolType %q is not web_search or web_search_preview", cfg.ID, e.opts.ToolType)
	}
	e.price = priceOf(cfg, 0.01)
	e.caps = Capabilities{AllowedDomains: e.opts.ToolType == "web_search", Country: true, ContextSize: true}
	return e, nil
}

func (e *openai) searchOptions(q Query) (*llm.SearchOptions, int) {
	so := &llm.SearchOptions{Tool: e.opts.ToolType, ContextSize: cmp.Or(q.ContextSize, e.opts.SearchContextSize), AllowedDomains: q.AllowedDomains}
	if len(q.Country) == 2 {
		so.Country = q.Country
	}
	return so, 0
}

// result reads an answer: its cited pages as sources (markers after the links the
// model appended), then the pages its searches listed, cited or not, as hits; the
// sources are topped up with uncited pages to the wanted count, so an answer that
// cites nothing still names its pages.
func (e *openai) result(q Query, a *wire.Response) (*Result, error) {
	res := &Result{Usage: Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	if reason, ok := strings.CutPrefix(a.StopDetail, "incomplete"); ok {
		res.partialf("OpenAI's answer is incomplete (%s)", cmp.Or(strings.TrimPrefix(reason, ": "), "unknown reason"))
	}
	if q.Country != "" && len(q.Country) != 2 {
		res.warnf("country %q is not an ISO 3166-1 alpha-2 code and was ignored", q.Country)
	}
	var p pages
	var listed, texts, summary []string
	searchCall := map[string]bool{}
	for _, part := range a.Content {
		switch part.Kind {
		case wire.PartServerCall:
			if part.Server.Action == "" || part.Server.Action == "search" {
				res.Usage.Searches++
				searchCall[part.Server.ID] = true
			}
		case wire.PartServerResult:
			for _, s := range part.Search.Sources {
				if searchCall[part.Search.CallID] && s.URL != "" {
					listed = append(listed, responses.PageURL(s.URL))
				}
			}
		case wire.PartText:
			texts = append(texts, part.Text)
			var m marks
			for _, c := range part.Citations {
				if c.URL != "" {
					m.add(CharToByte(part.Text, c.End), p.cite(Hit{Title: c.Title, URL: responses.PageURL(c.URL)}))
				}
			}
			if t := m.into(part.Text); strings.TrimSpace(t) != "" {
				summary = append(summary, t)
			}
		}
	}
	if a.StopDetail == "refusal" && len(texts) == 1 {
		return nil, &Error{Kind: BadRequest, Engine: e.id, Message: "OpenAI refused the query: " + redact.Truncate(texts[0], 200)}
	}
	res.Summary = strings.Join(summary, "\n\n")
	for _, u := range listed {
		p.add(Hit{URL: u})
	}
	p.citedFirst(res, q.Count)
	if n := a.Usage.SearchesReported; n > 0 {
		res.Usage.Searches = n
	}
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	return res, nil
}
