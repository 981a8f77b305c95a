package simulator

import (
	"net/http"

	"github.com/searchfleet/searchfleet/internal/fixtures"
)

// tavilyRoutes serves Tavily's POST /search from the pydantic-ai recording.
func tavilyRoutes() []engineRoute {
	ok := fixtures.Read("tavily/pydantic-test_basic_search.response.json")
	return []engineRoute{{
		kind:    "tavily",
		pattern: "POST /tavily/search",
		queryOf: jsonField("query"),
		answer:  func(*http.Request, []byte, string) []byte { return ok },
		empty: func() []byte {
			return []byte(`{"query":"","answer":null,"follow_up_questions":null,"images":[],"results":[],"response_time":0.1}`)
		},
		errorBody: func(int) []byte {
			return []byte(`{"detail":{"error":"simulated Tavily failure"}}`)
		},
	}}
}
