package simulator

// tavilyRoutes serves Tavily's POST /search: pages generated from the query in the
// shape of the pydantic-ai recording ("sim:fixture": the recording itself).
func tavilyRoutes() []engineRoute {
	return []engineRoute{{
		kind:    "tavily",
		pattern: "POST /tavily/search",
		queryOf: jsonField("query"),
		ask:     tavilyAsk,
		render:  tavilyBody,
		fixture: "tavily/pydantic-test_basic_search.response.json",
		empty:   []byte(`{"query":"","answer":null,"follow_up_questions":null,"images":[],"results":[],"response_time":0.1}`),
		errorBody: func(int) []byte {
			return []byte(`{"detail":{"error":"simulated Tavily failure"}}`)
		},
	}}
}
