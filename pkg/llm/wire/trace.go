package wire

import (
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
}

// TraceSource is one source a search returned, as the job's trace records it. Traces
// written before titles and dates were kept hold the bare URL string, which decodes
// into URL alone.
type TraceSource struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
	// PageAge is the page's publication date ("January 2, 2006") where the engine
	// gave one.
	PageAge string `json:"page_age,omitempty"`
}

// UnmarshalJSON reads a source as an object or, from older traces, a URL string.
func (s *TraceSource) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*s = TraceSource{}
		return json.Unmarshal(b, &s.URL)
	}
	type plain TraceSource
	return json.Unmarshal(b, (*plain)(s))
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

// AddTrace puts a job's searches into its answer: a server call and its result per
// trace entry, before the answer's text, in the order they ran. Each source carries
// the title and page age the trace recorded; a source without a title (older traces
// kept URLs only) takes it from the answer's numbered sources. Failed searches become
// results with an error and are not counted in Usage.WebSearches.
func (r *Response) AddTrace(trace json.RawMessage) error {
	if isNull(trace) {
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
	searches := 0
	for _, e := range entries {
		id := fmt.Sprintf("%d_%s", e.Hop, idToken(e.CallID))
		res := &SearchResult{CallID: id, Sources: []Source{}}
		if e.Error != "" {
			typ, msg, _ := strings.Cut(e.Error, ": ")
			code := searchErrorCodes[typ]
			if code == "" {
				code = "unavailable"
			}
			res.Error = &SearchError{Code: code, Message: msg}
		} else {
			searches++
			for _, s := range e.Sources {
				if s.Title == "" {
					s.Title = titles[s.URL]
				}
				res.Sources = append(res.Sources, Source{URL: s.URL, Title: s.Title, PageAge: s.PageAge})
			}
		}
		parts = append(parts, Part{Kind: PartServerCall, Server: &ServerCall{ID: id, Name: "web_search", Query: e.Query}}, Part{Kind: PartServerResult, Search: res})
	}
	r.Content = append(parts, r.Content...)
	r.Usage.WebSearches = searches
	return nil
}
