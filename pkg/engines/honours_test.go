package engines_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginecfg"
)

// withOption is a query that carries option o.
func withOption(o engines.Option) engines.Query {
	q := engines.Query{Query: "tide tables"}
	switch o {
	case engines.OptRecency:
		q.Recency = engines.OneWeek
	case engines.OptAllowedDomains:
		q.AllowedDomains = []string{"a.example"}
	case engines.OptBlockedDomains:
		q.BlockedDomains = []string{"b.example"}
	case engines.OptCountry:
		q.Country = "FR"
	case engines.OptLanguage:
		q.Language = "fr"
	case engines.OptCount:
		q.Count = 1
	case engines.OptContextSize:
		q.ContextSize = "high"
	}
	return q
}

// For every engine kind and every option, the option is honoured by the provider,
// applied by the fleet, or refused (strict) or warned about (not strict) with the
// engine and the option named: never dropped without a word.
func TestEveryKindEveryOption(t *testing.T) {
	t.Parallel()
	caps := engines.KindCapabilities()
	if len(caps) != len(engines.Kinds()) {
		t.Fatalf("%d kinds declare what they honour, want all %d", len(caps), len(engines.Kinds()))
	}
	old := time.Now().Add(-400 * 24 * time.Hour)
	hits := []engines.Hit{
		{Title: "A", URL: "https://a.example/1", Published: time.Now()},
		{Title: "B", URL: "https://b.example/2", Published: old},
	}
	for _, kind := range engines.Kinds() {
		for _, o := range engines.AllOptions {
			if o == engines.OptFreshness {
				continue // the search worker's cache: pkg/search tests max_age
			}
			id := "e-" + kind
			eng := engines.WithCapabilities(id, caps[kind], hits)
			q := withOption(o)
			tr := engines.TreatmentOf(caps[kind], o)
			t.Run(kind+"/"+string(o), func(t *testing.T) {
				res, err := eng.Search(context.Background(), q)
				if err != nil {
					t.Fatalf("not strict: %v", err)
				}
				strictQ := q
				strictQ.Strict = true
				_, serr := eng.Search(context.Background(), strictQ)
				warned := false
				for _, w := range res.Warnings {
					warned = warned || strings.Contains(w, id) && strings.Contains(w, strings.Split(string(o), "_")[0])
				}
				switch tr {
				case engines.Honoured:
					if serr != nil || warned {
						t.Errorf("honoured: strict error %v, warnings %v", serr, res.Warnings)
					}
				case engines.Applied:
					if serr != nil {
						t.Errorf("applied by the fleet, yet strict refused: %v", serr)
					}
					if len(res.Hits) != 1 {
						t.Errorf("applied by the fleet: hits %v, want 1", res.Hits)
					}
				case engines.Weakened, engines.Unsupported:
					var e *engines.Error
					if !errors.As(serr, &e) || e.Kind != engines.BadRequest || !strings.Contains(e.Message, id) || !strings.Contains(e.Message, string(o)) {
						t.Errorf("strict: err = %v, want a bad request naming %s and %s", serr, id, o)
					}
					if !warned {
						t.Errorf("not strict: warnings %v name neither %s nor %s", res.Warnings, id, o)
					}
				default:
					t.Fatalf("treatment %q", tr)
				}
			})
		}
	}
}

// The table in the docs is the one the declarations make.
func TestHonoursTableInDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/engine-options.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), engines.HonoursTable()) {
		t.Errorf("docs/engine-options.md does not hold the table the kinds declare; it should read:\n%s", engines.HonoursTable())
	}
}

// The configuration layer validates kinds against enginecfg.Kinds without importing
// the engines: the two lists are the same.
func TestConfigKindsAreTheEngineKinds(t *testing.T) {
	t.Parallel()
	if got, want := enginecfg.Kinds, engines.Kinds(); !slices.Equal(got, want) {
		t.Errorf("enginecfg.Kinds = %v, want engines.Kinds() %v", got, want)
	}
}
