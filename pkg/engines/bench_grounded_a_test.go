package engines_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Each benchmark parses and normalizes the kind's largest recorded response body.

// BenchmarkNormalizeGemini: 7 supports over 4 chunks, '°' text (10.5 KB).
func BenchmarkNormalizeGemini(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "gemini"}, engines.Query{Query: "weather in Mexico City today"},
		"gemini/pydantic-generate-websearch-mexico-2.response.json")
}

// BenchmarkNormalizeOpenAI: reasoning items with encrypted content, 4 web_search_call
// items, no citations (18.9 KB).
func BenchmarkNormalizeOpenAI(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "openai"}, engines.Query{Query: "population of Tokyo prefecture", AllowedDomains: []string{"wikipedia.org"}},
		"openai/pydantic-responses-web-search-allowed-domains.response.json")
}

// BenchmarkNormalizeAnthropic: the pause_turn pair, 15 searches and 150 results with
// encrypted content (450 KB in two bodies).
func BenchmarkNormalizeAnthropic(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "anthropic"}, engines.Query{Query: "San Francisco today"},
		"anthropic/pydantic-pause-turn.0.response.json", "anthropic/pydantic-pause-turn.1-continuation.response.json")
}
