package simulator

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The regular expression stripEvidence replaced, kept as its specification.
var evidenceSpec = regexp.MustCompile(`(?m)^</?search_results id="[0-9a-f]+">\n?`)

func TestStripEvidenceMatchesItsSpecification(t *testing.T) {
	for _, s := range []string{
		"",
		"plain text\nwith lines\n",
		"<search_results id=\"a1b2\">\nWeb search results for x:\n\n[1] T (https://e.com)\n</search_results id=\"a1b2\">",
		"<search_results id=\"a1b2\">\nbody\n</search_results id=\"a1b2\">\n",
		"<search_results id=\"a1b2\">no line end after it\n",
		"text <search_results id=\"ab\"> mid-line stays\n",
		"<search_results id=\"\">\nempty id stays\n",
		"<search_results id=\"XYZ\">\nupper-case id stays\n",
		"<search_results id=\"abc\"\nunclosed stays\n",
		"</search_results id=\"0f\">",
		"<search_results id=\"0f\">\n<search_results id=\"1e\">\n\nx\n",
		"Error: the search failed\n</search_results id=\"ff\">\n",
	} {
		if got, want := stripEvidence(s), evidenceSpec.ReplaceAllString(s, ""); got != want {
			t.Errorf("stripEvidence(%q) = %q, want %q", s, got, want)
		}
	}
}

func FuzzStripEvidence(f *testing.F) {
	f.Add("<search_results id=\"a1\">\nx\n</search_results id=\"a1\">")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := stripEvidence(s), evidenceSpec.ReplaceAllString(s, ""); got != want {
			t.Errorf("stripEvidence(%q) = %q, want %q", s, got, want)
		}
	})
}

// Brave's answers share the decoded fixture (shared, shallow): an answer must not
// change it, so the same ask answers the same bytes after other asks, and each answer
// is the fixture's shape with the ask's results.
func TestBraveBodyLeavesTheSharedFixtureAlone(t *testing.T) {
	a := newAsk("nats jetstream work queues", 5, nil, nil, "")
	b := newAsk("redis lua scripts", 3, nil, nil, "")
	first := braveBody(a)
	other := braveBody(b)
	if again := braveBody(a); !bytes.Equal(first, again) {
		t.Fatal("the same ask answered different bytes after another ask")
	}
	var body struct {
		Query struct {
			Original string `json:"original"`
		} `json:"query"`
		Web struct {
			Results []map[string]any `json:"results"`
		} `json:"web"`
		Videos any `json:"videos"`
	}
	if err := json.Unmarshal(other, &body); err != nil {
		t.Fatal(err)
	}
	if body.Query.Original != "redis lua scripts" || len(body.Web.Results) != 3 || body.Videos != nil {
		t.Fatalf("answer: query %q, %d results, videos %v", body.Query.Original, len(body.Web.Results), body.Videos != nil)
	}
	fixture := shared("brave/docs-shape-web-search.CONSTRUCTED.json")
	if fixture["videos"] == nil || obj(fixture["query"])["original"] == "redis lua scripts" {
		t.Fatal("an answer changed the shared fixture")
	}
}

// mayHoldFile lets through every body that carries a file (the files tests count
// them), and no ordinary chat request.
func TestMayHoldFile(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","messages":[{"role":"user","content":"hello"}]}`:                                       false,
		`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:a;base64,AA"}}]}]}`: true,
		`{"input":[{"type":"input_file","file_url":"https://e.com/a.pdf"}]}`:                                 true,
		`{"messages":[{"content":[{"type":"document","source":{"type":"base64"}}]}]}`:                        true,
		`{"contents":[{"parts":[{"inlineData":{"mimeType":"application/pdf"}}]}]}`:                           true,
		`{"messages":[{"role":"user","content":"\u003cfile name=\"a.txt\"\u003e…"}]}`:                        true,
	} {
		if got := mayHoldFile([]byte(body)); got != want {
			t.Errorf("mayHoldFile(%s) = %v, want %v", body, got, want)
		}
	}
}

func BenchmarkBraveBody(b *testing.B) {
	a := newAsk("nats jetstream work queues", 10, nil, nil, "")
	b.ReportAllocs()
	for b.Loop() {
		braveBody(a)
	}
}

func BenchmarkStripEvidence(b *testing.B) {
	s := "<search_results id=\"a1b2c3\">\n" + strings.Repeat("Web search results for x:\n\n[1] Title (https://example.com/a)\n    A snippet of the page.\n", 40) + "</search_results id=\"a1b2c3\">"
	b.ReportAllocs()
	for b.Loop() {
		stripEvidence(s)
	}
}

// The digests the simulator keeps to count repeats are bounded: a fleet run for days
// does not grow it without end, and a repeat within the window still counts.
func TestRepeatsAreCountedInABoundedWindow(t *testing.T) {
	s := New(Options{})
	for i := range 3 * seenWindow {
		s.stats.count("brave", []byte(strconv.Itoa(i)), "")
	}
	if n := len(s.stats.seen) + len(s.stats.older); n > 2*seenWindow {
		t.Fatalf("%d digests kept after %d requests, want at most %d", n, 3*seenWindow, 2*seenWindow)
	}
	s.stats.count("brave", []byte(strconv.Itoa(3*seenWindow-1)), "")
	s.stats.count("brave", []byte(strconv.Itoa(3*seenWindow-seenWindow-1)), "")
	if got := s.Stats().Duplicates["brave"]; got != 2 {
		t.Fatalf("%d repeats counted, want 2 (both within the window)", got)
	}
}
