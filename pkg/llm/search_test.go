package llm

import (
	"slices"
	"testing"
)

// Every Chat search declaration of the README's matrix is taken out of tools and read
// into the request's search settings; a nested settings object ({"web_search": {…}},
// OpenRouter's "parameters") is read on its own, so the wrapper key is not reported
// as an unsupported setting.
func TestChatSearchDeclarations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tool string
		want SearchOptions
	}{
		{`{"type":"web_search","engine":"brave","max_uses":2,"allowed_domains":["Go.dev"],"blocked_domains":["b.com"],"max_results":4}`,
			SearchOptions{Requested: true, Engine: "brave", MaxUses: 2, Count: 4, AllowedDomains: []string{"go.dev"}, BlockedDomains: []string{"b.com"}}},
		{`{"type":"web_search","web_search":{"max_uses":1}}`, SearchOptions{Requested: true, MaxUses: 1}},
		{`{"type":"openrouter:web_search","parameters":{"max_results":3,"allowed_domains":["a.com"]}}`,
			SearchOptions{Requested: true, Count: 3, AllowedDomains: []string{"a.com"}}},
		{`{"googleSearch":{}}`, SearchOptions{Requested: true}},
		{`{"type":"google_search"}`, SearchOptions{Requested: true}},
		{`{"type":"builtin_function","function":{"name":"$web_search"}}`, SearchOptions{Requested: true}},
	} {
		r, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + tc.tool + `,{"type":"function","function":{"name":"f"}}]}`))
		if err != nil {
			t.Errorf("%s: %v", tc.tool, err)
			continue
		}
		if len(r.Tools) != 1 || string(r.Tools[0]) != `{"type":"function","function":{"name":"f"}}` {
			t.Errorf("%s: tools left %s", tc.tool, r.Tools)
		}
		got := r.Search
		if got == nil || got.Requested != tc.want.Requested || got.Engine != tc.want.Engine || got.MaxUses != tc.want.MaxUses || got.Count != tc.want.Count ||
			!slices.Equal(got.AllowedDomains, tc.want.AllowedDomains) || !slices.Equal(got.BlockedDomains, tc.want.BlockedDomains) || len(got.Unhonoured) != 0 {
			t.Errorf("%s: search %+v, want %+v", tc.tool, got, tc.want)
		}
	}
}
