package search_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/search"
)

// BenchmarkDoneDecode reads a search result message as the chat worker's resume
// consumer does for every search: the fleet's largest bus message (ten hits and the
// rendered citation).
func BenchmarkDoneDecode(b *testing.B) {
	res := engines.Result{Engine: "brave", Query: "go generics tutorial", Usage: engines.Usage{Searches: 1}}
	for i := range 10 {
		res.Hits = append(res.Hits, engines.Hit{
			Title:     fmt.Sprintf("Result %d: a page about Go generics", i),
			URL:       fmt.Sprintf("https://example%d.com/go/generics?page=%d", i, i),
			Source:    fmt.Sprintf("example%d.com", i),
			Snippet:   strings.Repeat("Generics let a function take type parameters; ", 5),
			Published: time.Date(2026, 11, i+1, 0, 0, 0, 0, time.UTC),
		})
	}
	engines.Render(&res)
	m, err := bus.Encode("fleet.search.v1.done", search.Done{JobID: "j1", Hop: 1, CallID: "call_1", Engine: "brave", Result: res, Attempts: 1, Millis: 7, Worker: "w1"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Data)))
	for b.Loop() {
		if _, _, err := bus.Decode[search.Done](m.Data); err != nil {
			b.Fatal(err)
		}
	}
}
