package llm

import "testing"

// A request's search declaration may carry max_age (seconds) and cache "only": they
// are read, not reported as unsupported; the stricter max_age of two declarations
// wins; bad values are refused naming the parameter.
func TestSearchFreshnessOptions(t *testing.T) {
	t.Parallel()
	r, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],
	  "web_search_options":{"max_age":3600,"cache":"only"},"tools":[{"type":"web_search","max_age":60}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := r.Search
	if s == nil || s.MaxAge == nil || *s.MaxAge != 60 || s.Cache != "only" || len(s.Unhonoured) != 0 {
		t.Errorf("search %+v, want max_age 60, cache only, nothing unhonoured", s)
	}
	for _, bad := range []string{`{"max_age":-1}`, `{"max_age":"10"}`, `{"cache":"never"}`} {
		if _, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":` + bad + `}`)); err == nil {
			t.Errorf("web_search_options %s: accepted", bad)
		}
	}
}
