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
