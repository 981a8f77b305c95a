package wire

import (
	"encoding/json"
	"fmt"
	"strings"
)

// TraceEntry is one search of a job as the chat worker records it in the job's trace.
type TraceEntry struct {
	Hop     int      `json:"hop"`
	CallID  string   `json:"call_id"`
	Engine  string   `json:"engine,omitempty"`
	Query   string   `json:"query"`
	Sources []string `json:"sources"`
	// Error is "TYPE: message" when the search failed.
	Error string `json:"error,omitempty"`
}

// searchErrorCodes maps the fleet's search error types onto Anthropic's
// web_search_tool_result_error codes.
var searchErrorCodes = map[string]string{
	"SEARCH_RATE_LIMITED":    "too_many_requests",
	"SEARCH_LIMIT_REACHED":   "max_uses_exceeded",
	"INVALID_TOOL_ARGUMENTS": "invalid_tool_input",
	"INVALID_QUERY":          "invalid_tool_input",
	"SEARCH_BAD_REQUEST":     "invalid_tool_input",
}

// AddTrace puts a job's searches into its answer: a server call and its result per
// trace entry, before the answer's text, in the order they ran. Source titles come
// from the answer's numbered sources (the trace keeps URLs only); failed searches
// become results with an error and are not counted in Usage.WebSearches.
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
			for _, u := range e.Sources {
				res.Sources = append(res.Sources, Source{URL: u, Title: titles[u]})
			}
		}
		parts = append(parts, Part{Kind: PartServerCall, Server: &ServerCall{ID: id, Name: "web_search", Query: e.Query}}, Part{Kind: PartServerResult, Search: res})
	}
	r.Content = append(parts, r.Content...)
	r.Usage.WebSearches = searches
	return nil
}
