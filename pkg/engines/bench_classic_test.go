package engines_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// The classic kinds' benchmarks, each on its largest success fixture. All four are
// constructed from the documented formats (no recorded success body exists for Brave,
// SearXNG or Serper, and Exa's recorded one is a two-result docs example).

func BenchmarkNormalizeBrave(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "brave"}, engines.Query{Query: "go generics tutorial"}, braveWeb)
}

func BenchmarkNormalizeSearXNG(b *testing.B) {
	benchNormalize(b, searxngConfig, engines.Query{Query: "rust async runtime"}, searxngSearch)
}

func BenchmarkNormalizeExa(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "exa"}, engines.Query{Query: "llm agents"}, exaSearch)
}

func BenchmarkNormalizeSerper(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "serper"}, engines.Query{Query: "apple inc"}, serperSearch)
}
