package search

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// The content address is the same for the same search however its filters are
// spelled, and differs for any change the engine would answer differently.
func TestAddress(t *testing.T) {
	base := engines.Query{Query: "go 1.26", Recency: "week", AllowedDomains: []string{"go.dev", "golang.org"}, Language: "en", Country: "US"}
	a := Address("brave", base)
	same := base
	same.Query, same.AllowedDomains, same.Language, same.Count = " go 1.26 ", []string{"golang.org", "GO.dev"}, "EN", engines.DefaultCount
	if got := Address("brave", same); got != a {
		t.Errorf("the same search has two addresses")
	}
	for name, q := range map[string]engines.Query{
		"query":   {Query: "go 1.25", Recency: base.Recency, AllowedDomains: base.AllowedDomains, Language: "en", Country: "US"},
		"recency": {Query: base.Query, AllowedDomains: base.AllowedDomains, Language: "en", Country: "US"},
		"count":   {Query: base.Query, Recency: base.Recency, Count: 3, AllowedDomains: base.AllowedDomains, Language: "en", Country: "US"},
		"domains": {Query: base.Query, Recency: base.Recency, BlockedDomains: base.AllowedDomains, Language: "en", Country: "US"},
		"country": {Query: base.Query, Recency: base.Recency, AllowedDomains: base.AllowedDomains, Language: "en", Country: "GB"},
	} {
		if Address("brave", q) == a {
			t.Errorf("a different %s has the same address", name)
		}
	}
	if Address("tavily", base) == a {
		t.Error("another engine has the same address")
	}
}

// Only a successful result is recorded or cached.
func TestComplete(t *testing.T) {
	ok := &engines.Result{Engine: "brave", Query: "q", Hits: []engines.Hit{}}
	failed := engines.ErrorResult("brave", "q", &engines.Error{Kind: engines.Unavailable, Engine: "brave", Message: "down"})
	if !Complete(ok) || Complete(failed) || Complete(nil) {
		t.Error("Complete")
	}
	if _, ok := cacheable([]byte(`{"engine":"brave","hits":[],"citation":{"llmContent":"x","error":{"type":"SEARCH_UNAVAILABLE","message":"down"}}}`)); ok {
		t.Error("a cached failure is used")
	}
}
