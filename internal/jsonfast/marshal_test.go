package jsonfast_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/go-json-experiment/json/v1"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// envelope has the shape of pkg/bus's message envelope (unexported there): the
// payload behind an interface, as bus.Encode marshals it.
type envelope struct {
	Kind string      `json:"kind"`
	ID   string      `json:"id"`
	At   time.Time   `json:"at"`
	Data bus.Payload `json:"data"`
}

// searchResult is a search result of ten hits as the search worker encodes it for a
// chain: plain text with the characters encoding/json escapes (<, >, &, quotes) and
// some non-ASCII.
func searchResult() *engines.Result {
	r := &engines.Result{Engine: "brave", Query: "golang json encoding <fast> & safe"}
	for i := range 10 {
		r.Hits = append(r.Hits, engines.Hit{
			Title:   fmt.Sprintf("Result %d — “quoted” <b>bold</b>", i),
			URL:     fmt.Sprintf("https://example.com/a/b?x=%d&y=2", i),
			Source:  "example.com",
			Snippet: "A snippet about JSON encoding in Go, with é ü 日本語, an ampersand & and a < sign, " + strings.Repeat("of a realistic length ", 5),
		})
	}
	r.Citation.ReturnDisplay = "Found 10 results"
	r.Usage.CostUSD = 0.005
	return r
}

// BenchmarkMarshal compares encoding/json's Marshal with the v1 emulation's on the two
// hottest encodes of a fleetbench profile (apart from the model requests): a search
// result (search.Worker.finish) and a bus message's envelope (bus.Encode). It is why
// this package has no Marshal: the emulation is no faster (see the package comment).
func BenchmarkMarshal(b *testing.B) {
	at := time.Date(2026, 11, 28, 15, 0, 0, 123456789, time.UTC)
	values := []struct {
		name string
		v    any
	}{
		{"search-result", searchResult()},
		{"event-envelope", envelope{Kind: "event.v1", ID: "job-123:2:search.started:call_abc", At: at,
			Data: bus.Event{JobID: "job-123", Type: "search.started", At: at, Hop: 2, CallID: "call_abc", Engine: "brave", Query: "golang json"}}},
	}
	for _, c := range values {
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/emulation", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v1.Marshal(c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEmulationMarshalDiffers pins the difference that keeps the emulation's Marshal
// out of this package: a string with invalid UTF-8 is encoded with U+FFFD as the
// escape \ufffd by encoding/json but as the raw character by the emulation, and no
// option changes that. Fetched pages and snippets cut by bytes can carry such strings
// into stored records and answers. Should a new version of the library encode them
// as encoding/json does, this test fails: then the package comment's reasons (and
// the benchmark above) are worth checking again.
func TestEmulationMarshalDiffers(t *testing.T) {
	v := struct {
		S string `json:"s"`
	}{S: "a\xffb"}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v1.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != `{"s":"a\ufffdb"}` {
		t.Fatalf("encoding/json encodes %s", want)
	}
	if string(got) != "{\"s\":\"a\uFFFDb\"}" {
		t.Fatalf("the emulation now encodes %s (encoding/json: %s): see the package comment", got, want)
	}
}
