package simulator

import (
	"net/http"

	"github.com/searchfleet/searchfleet/internal/fixtures"
)

// tavilyRoutes serves Tavily's POST /search: pages generated from the query in the
// shape of the pydantic-ai recording ("sim:fixture": the recording itself).
func tavilyRoutes() []engineRoute {
	ok := fixtures.Read("tavily/pydantic-test_basic_search.response.json")
	return []engineRoute{{
		kind:    "tavily",
		pattern: "POST /tavily/search",
		queryOf: jsonField("query"),
		answer: func(r *http.Request, b []byte, q string) []byte {
			return tavilyBody(tavilyAsk(r, b, q))
		},
		recorded: fixed(ok),
		empty:    []byte(`{"query":"","answer":null,"follow_up_questions":null,"images":[],"results":[],"response_time":0.1}`),
		errorBody: func(int) []byte {
			return []byte(`{"detail":{"error":"simulated Tavily failure"}}`)
		},
	}}
}
