package wire

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
)

// TraceEntry is one search of a job as the chat worker records it in the job's trace.
type TraceEntry struct {
	Hop     int           `json:"hop"`
	CallID  string        `json:"call_id"`
	Engine  string        `json:"engine,omitempty"`
	Query   string        `json:"query"`
	Sources []TraceSource `json:"sources"`
	// Error is "TYPE: message" when the search failed.
	Error string `json:"error,omitempty"`
	// Tool is "web_fetch" for a fetch of URL (absent: a search); Kind, Truncated and
	// Excerpt say what the fetch read.
	Tool      string `json:"tool,omitempty"`
	URL       string `json:"url,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Excerpt   string `json:"excerpt,omitempty"`
	// RetrievedAt is when the page was read (RFC 3339).
	RetrievedAt string `json:"retrieved_at,omitempty"`
}

// TraceSource is one source a search returned, as the job's trace records it.
type TraceSource struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
	// PageAge is the page's publication date ("January 2, 2006") where the engine
	// gave one.
	PageAge string `json:"page_age,omitempty"`
}

// searchErrorCodes maps the fleet's search error types onto Anthropic's
// web_search_tool_result_error codes.
var searchErrorCodes = map[string]string{
	"SEARCH_RATE_LIMITED":  "too_many_requests",
	"SEARCH_LIMIT_REACHED": "max_uses_exceeded",
	// A spent budget (the tenant's, the batch's or the request's max_cost_usd) ends
	// the searches as max_uses does: the closest of Anthropic's codes.
	"SEARCH_BUDGET_EXHAUSTED": "max_uses_exceeded",
	"INVALID_TOOL_ARGUMENTS":  "invalid_tool_input",
	"INVALID_QUERY":           "invalid_tool_input",
	"SEARCH_BAD_REQUEST":      "invalid_tool_input",
}

// fetchErrorCodes maps the fleet's fetch error types onto Anthropic's
// web_fetch_tool_result_error codes.
var fetchErrorCodes = map[string]string{
	"INVALID_TOOL_ARGUMENTS":         "invalid_tool_input",
	"FETCH_INVALID_URL":              "invalid_tool_input",
	"FETCH_REFUSED":                  "url_not_allowed",
	"FETCH_HTTP_ERROR":               "url_not_accessible",
	"FETCH_UNREACHABLE":              "url_not_accessible",
	"FETCH_TOO_MANY_REDIRECTS":       "url_not_accessible",
	"FETCH_UNSUPPORTED_CONTENT_TYPE": "unsupported_content_type",
	"FETCH_LIMIT_REACHED":            "max_uses_exceeded",
}

// AddTrace puts a job's searches and fetches into its answer: a server call and its result per
// trace entry, before the answer's text, in the order they ran. Each source carries
// the title and page age the trace recorded; a source without a title takes it from
// the answer's numbered sources. Failed searches become
// results with an error and are not counted in Usage.WebSearches.
func (r *Response) AddTrace(trace json.RawMessage) error {
	if IsNull(trace) {
		return nil
	}
	var entries []TraceEntry
	if err := json.Unmarshal(trace, &entries); err != nil {
		return fmt.Errorf("job trace unreadable: %w", err)
	}
	titles := make(map[string]string, len(r.Sources))
	for _, s := range r.Sources {
		titles[s.URL] = s.Title
	}
	parts := make([]Part, 0, 2*len(entries)+len(r.Content))
	searches, fetches := 0, 0
	for _, e := range entries {
		id := fmt.Sprintf("%d_%s", e.Hop, IDToken(e.CallID))
		res := &SearchResult{CallID: id, Sources: []Source{}, Fetch: e.Tool == FetchName}
		call, codes := &ServerCall{ID: id, Name: "web_search", Query: e.Query}, searchErrorCodes
		if res.Fetch {
			call, codes = &ServerCall{ID: id, Name: FetchName, URL: e.URL}, fetchErrorCodes
		}
		if e.Error != "" {
			typ, msg, _ := strings.Cut(e.Error, ": ")
			res.Error = &SearchError{Code: cmp.Or(codes[typ], "unavailable"), Message: msg}
		} else {
			for _, s := range e.Sources {
				s.Title = cmp.Or(s.Title, titles[s.URL])
				if res.Fetch {
					s.PageAge = "" // a page read carries its URL and title only
				}
				res.Sources = append(res.Sources, Source(s))
			}
		}
		switch {
		case res.Error != nil:
		case res.Fetch:
			fetches++
			res.Page = &FetchedPage{URL: e.URL, Text: e.Excerpt, Kind: e.Kind, Truncated: e.Truncated, RetrievedAt: e.RetrievedAt}
			if n := len(res.Sources); n > 0 {
				res.Page.URL, res.Page.Title = res.Sources[n-1].URL, res.Sources[n-1].Title
			}
		default:
			searches++
		}
		parts = append(parts, Part{Kind: PartServerCall, Server: call}, Part{Kind: PartServerResult, Search: res})
	}
	r.Content = append(parts, r.Content...)
	r.Usage.WebSearches, r.Usage.WebFetches = searches, fetches
	return nil
}

// ShowTo trims r, an answer for a client of protocol p that sent req, to what that
// client is shown.
//
// Server calls of tools the request did not declare are dropped, with their results.
// The fleet searches on its own when a question needs it (pkg/intent), but the
// Responses and Messages APIs return a web_search_call or a server_tool_use only for a
// tool the request declared, and a strict client (the Vercel AI SDK) fails on a call of
// a tool it cannot find among its own. Such a search reaches the client as its text's
// citations and the answer's usage, and its trace stays in GET /v1/jobs/{id}. A Chat
// answer has no server call items (its stream's progress lines are SSE comments).
//
// A Messages client that did not ask for thinking is not given another model's
// reasoning (Claude thinks only when asked; a Gemini or OpenAI model reasons anyway).
func (r *Response) ShowTo(req *Request, p Protocol) {
	var search, fetch, reasoning bool
	if req != nil && req.Search != nil {
		search, fetch = req.Search.Requested, req.Search.Fetch
	}
	if req != nil && req.Reasoning != nil {
		reasoning = !req.Reasoning.Off()
	}
	switch p {
	case OpenAIResponses:
		fetch = search   // a fetch is a web_search_call's open_page action
		reasoning = true // reasoning items come back whatever the request asked
	case AnthropicMessages:
	default:
		return
	}
	if search && fetch && reasoning {
		return
	}
	hidden := map[string]bool{}
	kept := make([]Part, 0, len(r.Content))
	for _, part := range r.Content {
		switch {
		case part.Kind == PartServerCall && !(part.Server.IsFetch() && fetch || !part.Server.IsFetch() && search):
			hidden[part.Server.ID] = true
			continue
		case part.Kind == PartServerResult && hidden[part.Search.CallID]:
			continue
		case part.Kind == PartReasoning && !reasoning && part.Reasoning != nil && part.Reasoning.Protocol != AnthropicMessages:
			continue
		}
		kept = append(kept, part)
	}
	r.Content = kept
}
