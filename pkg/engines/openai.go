package engines

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// openai is OpenAI's Responses API with the hosted web_search tool: POST
// {base}/v1/responses with a bearer key; default base https://api.openai.com, default
// model gpt-5-mini (the cheapest current model that takes the tool with domain filters).
//
// The request asks for the searched pages themselves
// (include: ["web_search_call.action.sources"]) and does not store the response
// (store: false), since a search is one stateless turn. tool_choice stays "auto", as in
// every recording: forcing the hosted tool is refused by some models and tool versions
// (the recorded 400 "Tool choice 'web_search' not found in 'tools' parameter").
//
// Options: {"searchContextSize": "low"|"medium"|"high"} (how much page text the tool
// feeds the model; unset means OpenAI's default, medium) and {"toolType":
// "web_search"|"web_search_preview"} (the preview tool, which Azure OpenAI and older
// models take, has no domain filter; default web_search). The model is Config.Model.
//
// Filters: allowed domains (filters.allowed_domains) and the country
// (user_location.country) are applied by OpenAI; the rest is left to the shared
// normalization. Pricing: $10 per 1,000 web search calls, so the default cost is $0.01
// per search (a search action, or tool_usage.web_search.num_requests when the response
// reports it); the tokens of the search context are billed at model rates on top and
// are reported in Usage, not priced.
type openai struct {
	client
	keyEnv string
	model  string
	opts   openaiOptions
	price  float64
}

type openaiOptions struct {
	SearchContextSize string `json:"searchContextSize,omitempty"`
	ToolType          string `json:"toolType,omitempty"`
}

func newOpenAI(cfg Config, hc *http.Client) (Engine, error) {
	e := &openai{client: newClient(cfg, hc, "https://api.openai.com"), keyEnv: cfg.APIKeyEnv, model: strings.TrimSpace(cfg.Model)}
	if err := cfg.options(&e.opts); err != nil {
		return nil, err
	}
	if e.model == "" {
		e.model = "gpt-5-mini"
	}
	switch e.opts.SearchContextSize {
	case "", "low", "medium", "high":
	default:
		return nil, fmt.Errorf("engine %q: options.searchContextSize %q is not low, medium or high", cfg.ID, e.opts.SearchContextSize)
	}
	switch e.opts.ToolType {
	case "":
		e.opts.ToolType = "web_search"
	case "web_search", "web_search_preview":
	default:
		return nil, fmt.Errorf("engine %q: options.toolType %q is not web_search or web_search_preview", cfg.ID, e.opts.ToolType)
	}
	e.price = cfg.price(0.01)
	return e, nil
}

func (e *openai) Name() string { return e.id }

// Capabilities: allowed domains (web_search only) and country; see the type's comment.
func (e *openai) Capabilities() Capabilities {
	return Capabilities{AllowedDomains: e.opts.ToolType == "web_search", Country: true}
}

type openaiRequest struct {
	Model        string        `json:"model"`
	Instructions string        `json:"instructions"`
	Input        []openaiInput `json:"input"`
	Tools        []openaiTool  `json:"tools"`
	ToolChoice   string        `json:"tool_choice"`
	Include      []string      `json:"include"`
	Store        bool          `json:"store"`
}

type openaiInput struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type openaiTool struct {
	Type              string          `json:"type"`
	SearchContextSize string          `json:"search_context_size,omitempty"`
	Filters           *openaiFilters  `json:"filters,omitempty"`
	UserLocation      *openaiLocation `json:"user_location,omitempty"`
}

type openaiFilters struct {
	AllowedDomains []string `json:"allowed_domains"`
}

type openaiLocation struct {
	Type    string `json:"type"`
	Country string `json:"country"`
}

type openaiResponse struct {
	Status string `json:"status"`
	Error  *struct {
		Code    string `json:"code"`
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
		Action *struct {
			Type    string `json:"type"`
			Sources []struct {
				Type string `json:"type"`
				URL  string `json:"url"`
			} `json:"sources"`
		} `json:"action"`
		Content []struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Refusal     string `json:"refusal"`
			Annotations []struct {
				Type       string `json:"type"`
				StartIndex int    `json:"start_index"`
				EndIndex   int    `json:"end_index"`
				URL        string `json:"url"`
				Title      string `json:"title"`
			} `json:"annotations"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	ToolUsage *struct {
		WebSearch *struct {
			NumRequests int `json:"num_requests"`
		} `json:"web_search"`
	} `json:"tool_usage"`
}

func (e *openai) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, missingKey(Config{ID: e.id, APIKeyEnv: e.keyEnv})
	}
	tool := openaiTool{Type: e.opts.ToolType, SearchContextSize: e.opts.SearchContextSize}
	if len(q.AllowedDomains) > 0 && e.opts.ToolType == "web_search" {
		tool.Filters = &openaiFilters{AllowedDomains: q.AllowedDomains}
	}
	if len(q.Country) == 2 {
		tool.UserLocation = &openaiLocation{Type: "approximate", Country: strings.ToUpper(q.Country)}
	}
	req := openaiRequest{
		Model:        e.model,
		Instructions: groundedAInstructions(q),
		Input:        []openaiInput{{Role: "user", Content: q.Query}},
		Tools:        []openaiTool{tool},
		ToolChoice:   "auto",
		Include:      []string{"web_search_call.action.sources"},
	}
	body, _, err := e.do(ctx, request{path: "/v1/responses", header: bearer(e.key), body: req})
	if err != nil {
		return nil, err
	}
	return e.parse(q, [][]byte{body})
}

func (e *openai) parse(q Query, bodies [][]byte) (*Result, error) {
	if len(bodies) == 0 {
		return nil, &Error{Kind: Decode, Engine: e.id, Message: "no response body"}
	}
	var resp openaiResponse
	if err := e.decode(bodies[0], &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil && (resp.Status == "failed" || len(resp.Output) == 0) {
		return nil, e.inBandError(resp.Error.Code, resp.Error.Type, resp.Error.Message)
	}
	if resp.Status == "" && resp.Output == nil {
		return nil, &Error{Kind: Decode, Engine: e.id, Message: "not a Responses API response (no status, no output)"}
	}

	res := &Result{Usage: Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}}
	if resp.Status == "incomplete" {
		reason := "unknown reason"
		if resp.IncompleteDetails != nil && resp.IncompleteDetails.Reason != "" {
			reason = resp.IncompleteDetails.Reason
		}
		res.warnf("OpenAI's answer is incomplete (%s)", reason)
	}
	if q.Country != "" && len(q.Country) != 2 {
		res.warnf("country %q is not an ISO 3166-1 alpha-2 code and was ignored", q.Country)
	}

	cited := map[string]int{} // cleaned URL -> 1-based source number
	var parts, sourced []string
	refusal := ""
	for _, item := range resp.Output {
		switch item.Type {
		case "web_search_call":
			// Azure records status "searching" for finished calls; the action is what
			// counts. A call without an action (early preview format) was a search too.
			if item.Action == nil || item.Action.Type == "search" {
				res.Usage.Searches++
			}
			if item.Action != nil {
				for _, s := range item.Action.Sources {
					if s.Type == "url" || (s.Type == "" && s.URL != "") {
						sourced = append(sourced, openaiCleanURL(s.URL))
					}
				}
			}
		case "message":
			for _, c := range item.Content {
				switch c.Type {
				case "refusal":
					refusal = c.Refusal
				case "output_text":
					byEnd := map[int][]int{}
					var ends []int
					for _, a := range c.Annotations {
						if a.Type != "url_citation" || a.URL == "" {
							continue
						}
						u := openaiCleanURL(a.URL)
						n, ok := cited[u]
						if !ok {
							res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{Title: a.Title, URI: u}})
							n = len(res.Citation.Sources)
							cited[u] = n
						}
						end := openaiAnnotationEnd(c.Text, a.StartIndex, a.EndIndex, a.URL)
						if _, seen := byEnd[end]; !seen {
							ends = append(ends, end)
						}
						byEnd[end] = append(byEnd[end], n)
					}
					ins := make([]Insert, 0, len(ends))
					for _, end := range ends {
						ins = append(ins, Insert{Offset: end, Text: MarkerText(byEnd[end])})
					}
					if t := groundedAInsert(c.Text, ins); strings.TrimSpace(t) != "" {
						parts = append(parts, t)
					}
				}
			}
		}
	}
	if len(parts) == 0 && refusal != "" {
		return nil, &Error{Kind: BadRequest, Engine: e.id, Message: "OpenAI refused the query: " + truncate(refusal, 200)}
	}
	res.Summary = strings.Join(parts, "\n\n")

	// Hits: the cited pages first (they carry titles), then the other pages the tool
	// returned, in its order.
	for _, s := range res.Citation.Sources {
		res.Hits = append(res.Hits, Hit{Title: s.Web.Title, URL: s.Web.URI})
	}
	seen := make(map[string]bool, len(sourced))
	for _, u := range sourced {
		if _, isCited := cited[u]; isCited || seen[u] || u == "" {
			continue
		}
		seen[u] = true
		res.Hits = append(res.Hits, Hit{URL: u})
	}
	// The text the main model reads lists the cited pages, topped up with uncited ones
	// to the wanted count, so an answer that cites nothing still names its pages.
	for _, h := range res.Hits[len(res.Citation.Sources):] {
		if len(res.Citation.Sources) >= q.Count {
			break
		}
		res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{URI: h.URL}})
	}

	if tu := resp.ToolUsage; tu != nil && tu.WebSearch != nil && tu.WebSearch.NumRequests > 0 {
		res.Usage.Searches = tu.WebSearch.NumRequests
	}
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	return res, nil
}

// inBandError classifies an error object that arrived inside a 2xx response.
func (e *openai) inBandError(code, typ, msg string) *Error {
	err := &Error{Kind: BadRequest, Engine: e.id, Message: e.redact(truncate(strings.TrimSpace(code+": "+msg), 300))}
	switch code {
	case "rate_limit_exceeded":
		err.Kind = RateLimited
	case "insufficient_quota":
		err.Kind = Quota
	case "invalid_api_key":
		err.Kind = Auth
	case "server_error", "vector_store_timeout":
		err.Kind = Unavailable
	default:
		if typ == "server_error" {
			err.Kind = Unavailable
		}
	}
	return err
}

// openaiAnnotationEnd returns the byte offset where a url_citation's marker goes. The
// annotation's indices count characters (code points), not bytes; the span they give
// normally is the markdown link the model appended ("([host](url))"), so it is trusted
// when it contains the cited URL or its host. Otherwise the link is looked up in the
// text (nearest to the given end) and the marker goes after its closing parentheses;
// failing that, the given end is used, or the end of the text for an empty span.
func openaiAnnotationEnd(text string, start, end int, rawURL string) int {
	s, e := CharToByte(text, max(start, 0)), CharToByte(text, max(end, 0))
	host := hostOf(rawURL)
	if start < end && s < e {
		span := text[s:e]
		if strings.Contains(span, rawURL) || (host != "" && strings.Contains(strings.ToLower(span), host)) {
			return e
		}
	}
	for _, u := range []string{rawURL, openaiCleanURL(rawURL)} {
		if p, ok := groundedANearest(text, u, e); ok {
			for i := 0; i < 2 && p < len(text) && text[p] == ')'; i++ {
				p++
			}
			return p
		}
	}
	if start >= end {
		return len(text)
	}
	return e
}

// openaiCleanURL drops the utm_source=openai tracking parameter OpenAI adds to cited
// URLs, so a cited page and the same page among the tool's sources are one page.
func openaiCleanURL(raw string) string {
	if !strings.Contains(raw, "utm_source=openai") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	v := u.Query()
	if v.Get("utm_source") != "openai" {
		return raw
	}
	v.Del("utm_source")
	u.RawQuery = v.Encode()
	return u.String()
}
