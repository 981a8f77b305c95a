package engines_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// benchNormalize measures parsing + normalization of recorded bodies, allocations
// included. Each kind's benchmark uses its largest recorded fixture.
func benchNormalize(b *testing.B, cfg engines.Config, q engines.Query, files ...string) {
	bodies := make([][]byte, len(files))
	size := 0
	for i, f := range files {
		bodies[i] = fixtures.Read(f)
		size += len(bodies[i])
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := engines.Normalize(cfg, q, bodies...); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNormalizeTavily(b *testing.B) {
	benchNormalize(b, engines.Config{Kind: "tavily"}, engines.Query{Query: "transformer architectures"},
		"tavily/pydantic-test_search_with_include_domains.response.json")
}

// BenchmarkBuildLLMContent renders the model's text of a Brave result (snippets, no
// summary): what the chat worker does for every search result it hands the model.
func BenchmarkBuildLLMContent(b *testing.B) {
	res, err := engines.Normalize(engines.Config{Kind: "brave"}, engines.Query{Query: "go generics tutorial"}, fixtures.Read(braveWeb))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		engines.BuildLLMContent(res.Query, res.Summary, res.Citation.Sources, res.Hits, nil)
	}
}
