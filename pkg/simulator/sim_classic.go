package simulator

import (
	"fmt"
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
)

// classicRoutes serves the classic search APIs, each at the kind's native path under
// /<kind>: Brave's GET /res/v1/web/search, SearXNG's GET /search, Exa's POST /search
// and Serper's POST /search. The success bodies are pages generated from the query in
// the shape of the constructed docs-shape fixtures (no recorded success exists for
// Brave, SearXNG or Serper), which "sim:fixture" returns as they are; the error bodies
// follow each provider's own envelope, with "simulated" in the text.
func classicRoutes() []engineRoute {
	braveQuota := fixtures.Read("brave/logged-402-usage-limit-exceeded.json")
	searxngForbidden := fixtures.Read("searxng/docs-shape-403-format-disabled.CONSTRUCTED.html")
	return []engineRoute{
		{
			kind:    "brave",
			pattern: "GET /brave/res/v1/web/search",
			queryOf: urlParam("q"),
			ask:     braveAsk,
			render:  braveBody,
			fixture: "brave/docs-shape-web-search.CONSTRUCTED.json",
			empty:   []byte(`{"type":"search","query":{"original":"","more_results_available":false},"mixed":{"type":"mixed","main":[],"top":[],"side":[]}}`),
			errorBody: func(status int) []byte {
				if status == http.StatusPaymentRequired {
					return braveQuota // the recorded body
				}
				return braveErrorBody(status)
			},
		},
		{
			kind:      "searxng",
			pattern:   "GET /searxng/search",
			queryOf:   urlParam("q"),
			ask:       searxngAsk,
			render:    searxngBody,
			fixture:   "searxng/docs-shape-search.CONSTRUCTED.json",
			empty:     []byte(`{"query":"","number_of_results":0,"results":[],"answers":[],"corrections":[],"infoboxes":[],"suggestions":[],"unresponsive_engines":[]}`),
			errorBody: searxngErrorBody(searxngForbidden),
		},
		{
			kind:      "exa",
			pattern:   "POST /exa/search",
			queryOf:   jsonField("query"),
			ask:       bodyAsk("numResults", "includeDomains", "excludeDomains", "startPublishedDate", recencySince(time.RFC3339)),
			render:    exaBody,
			fixture:   "exa/docs-shape-search-highlights.CONSTRUCTED.json",
			empty:     []byte(`{"requestId":"sim-empty","results":[],"costDollars":{"total":0.005,"search":{"neural":0.005}}}`),
			errorBody: exaErrorBody,
		},
		{
			kind:      "serper",
			pattern:   "POST /serper/search",
			queryOf:   jsonField("q"),
			ask:       bodyAsk("num", "", "", "tbs", serperRecency),
			render:    serperBody,
			fixture:   "serper/docs-shape-search.CONSTRUCTED.json",
			empty:     []byte(`{"searchParameters":{"q":"","type":"search","engine":"google"},"organic":[],"credits":1}`),
			errorBody: serperErrorBody,
		},
	}
}

// braveErrorBody is Brave's {"type":"ErrorResponse","error":{…}} envelope with the code
// Brave uses for status.
func braveErrorBody(status int) []byte {
	invalid := [2]string{"SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid. (simulated)"}
	e := byStatus(status, [2]string{"SIMULATED_FAILURE", "Simulated Brave failure."}, map[int][2]string{
		http.StatusTooManyRequests: {"RATE_LIMITED", "Request rate limit exceeded for plan. (simulated)"},
		http.StatusUnauthorized:    invalid, http.StatusForbidden: invalid})
	return mustJSON(map[string]any{
		"type": "ErrorResponse",
		"error": map[string]any{
			"id": "simulated", "status": status, "code": e[0], "detail": e[1],
			"meta": map[string]any{"component": "simulator"},
		},
		"time": 0,
	})
}

// searxngErrorBody answers as SearXNG and what stands in front of it do: Flask's bare
// HTML pages (its 403 is the refusal of a disabled output format), the limiter's
// plain-text 429 and an authenticating proxy's 401 page.
func searxngErrorBody(forbidden []byte) func(int) []byte {
	return func(status int) []byte {
		switch status {
		case http.StatusForbidden:
			return forbidden
		case http.StatusTooManyRequests:
			return []byte("Too Many Requests (simulated)")
		case http.StatusUnauthorized:
			return []byte("<html>\r\n<head><title>401 Authorization Required</title></head>\r\n<body>\r\n<center><h1>401 Authorization Required</h1></center>\r\n<hr><center>simulated proxy</center>\r\n</body>\r\n</html>\r\n")
		}
		return fmt.Appendf(nil, "<!doctype html>\n<html lang=en>\n<title>%d %s</title>\n<h1>%s</h1>\n<p>Simulated SearXNG failure.</p>\n", status, http.StatusText(status), http.StatusText(status))
	}
}

// exaErrorBody is Exa's {"requestId","error","tag"} envelope.
func exaErrorBody(status int) []byte {
	e := byStatus(status, [2]string{"INTERNAL_ERROR", "Internal server error (simulated)"}, map[int][2]string{
		http.StatusUnauthorized:    {"INVALID_API_KEY", "Invalid API key (simulated)"},
		http.StatusPaymentRequired: {"NO_MORE_CREDITS", "You have run out of credits (simulated)"},
		http.StatusForbidden:       {"ACCESS_DENIED", "Access denied (simulated)"},
		http.StatusTooManyRequests: {"RATE_LIMIT_EXCEEDED", "Rate limit exceeded (simulated)"}})
	return mustJSON(map[string]any{"requestId": "simulated", "error": e[1], "tag": e[0]})
}

// serperErrorBody is Serper's {"message","statusCode"} envelope.
func serperErrorBody(status int) []byte {
	msg := byStatus(status, "Internal server error (simulated)", map[int]string{http.StatusUnauthorized: "Unauthorized. (simulated)",
		http.StatusForbidden: "Unauthorized. (simulated)", http.StatusTooManyRequests: "Too many requests (simulated)"})
	return mustJSON(map[string]any{"message": msg, "statusCode": status})
}

// byStatus is cases[status], or def when status has none: an error envelope's words
// for a status.
func byStatus[T any](status int, def T, cases map[int]T) T {
	if v, ok := cases[status]; ok {
		return v
	}
	return def
}

// tavilyRoutes serves Tavily's POST /search: pages generated from the query in the
// shape of the pydantic-ai recording ("sim:fixture": the recording itself).
func tavilyRoutes() []engineRoute {
	return []engineRoute{{
		kind:    "tavily",
		pattern: "POST /tavily/search",
		queryOf: jsonField("query"),
		ask:     bodyAsk("max_results", "include_domains", "exclude_domains", "time_range", recencyOf),
		render:  tavilyBody,
		fixture: "tavily/pydantic-test_basic_search.response.json",
		empty:   []byte(`{"query":"","answer":null,"follow_up_questions":null,"images":[],"results":[],"response_time":0.1}`),
		errorBody: func(int) []byte {
			return []byte(`{"detail":{"error":"simulated Tavily failure"}}`)
		},
	}}
}
