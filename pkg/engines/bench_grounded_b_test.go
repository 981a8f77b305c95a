package engines_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Each benchmark parses and normalizes the kind's largest response fixture (all the
// rounds of one search for Kimi).

func BenchmarkNormalizeGLMChat(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "glm-chat"}, engines.Query{Query: "2025年4月的重要财经事件、政策变化和市场数据"},
		"zhipu/glm-chat-finance-zh.CONSTRUCTED.json")
}

func BenchmarkNormalizeGLMAPI(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "glm-api"}, engines.Query{Query: "千问"},
		"zhipu/realcase-web-search-api-search-std.response.json")
}

func BenchmarkNormalizeKimi(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "kimi"}, engines.Query{Query: "kimi k2.6 code preview user review"},
		"moonshot/hermoonshotes-round1-tool-calls.response.json", "moonshot/hermoonshotes-round2-final.response.json")
}

func BenchmarkNormalizePerplexity(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "perplexity"}, engines.Query{Query: "San Francisco weather"},
		"perplexity/docs-shape-agent-web-search.CONSTRUCTED.json")
}

func BenchmarkNormalizeOpenRouter(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "openrouter"}, engines.Query{Query: "Pydantic AI GitHub repository"},
		"openrouter/pydantic-server-tool-web-search-annotations.response.json")
}
