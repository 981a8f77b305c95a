package fetch_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// Parallel's Extract API as the web_fetch backend, against the simulator serving it
// in its documented shape: a page is read (title, markdown text, cut at the cap and
// said so); a URL Parallel could not read, a refused key and a bad URL are page
// errors the model reads, the last without a call.
func TestParallelExtractBackend(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	var _ fetch.PageFetcher = (*fetch.Parallel)(nil)
	p := fetch.NewParallel(fetch.ParallelOptions{BaseURL: srv.URL + "/parallel", APIKey: "sim-key", Client: srv.Client()})
	ctx := context.Background()

	page, err := p.Fetch(ctx, "https://www.example.com/tides/brest?sim:fixture")
	if err != nil || page.Error != nil {
		t.Fatalf("fixture: %v %+v", err, page.Error)
	}
	if page.Title != "Tide tables of Brest — Example Harbour Office" || !strings.Contains(page.Text, "High water at Brest") || page.Kind != fetch.KindPage || page.Truncated {
		t.Errorf("fixture page %+v", page)
	}

	short := fetch.NewParallel(fetch.ParallelOptions{BaseURL: srv.URL + "/parallel", APIKey: "sim-key", Client: srv.Client(), MaxTextChars: 40})
	if page, _ = short.Fetch(ctx, "https://example.org/a"); page.Error != nil || !page.Truncated || len([]rune(page.Text)) != 40 {
		t.Errorf("capped page: truncated %v, %d characters, error %v", page.Truncated, len([]rune(page.Text)), page.Error)
	}
	if page, _ = p.Fetch(ctx, "https://example.org/gone?sim:unreadable"); page.Error == nil || page.Error.Type != fetch.ErrHTTPStatus || page.Status != 404 {
		t.Errorf("unreadable page: %+v", page)
	}
	nokey := fetch.NewParallel(fetch.ParallelOptions{BaseURL: srv.URL + "/parallel", Client: srv.Client()})
	if page, _ = nokey.Fetch(ctx, "https://example.org/a"); page.Error == nil || page.Error.Type != fetch.ErrUnavailable || !strings.Contains(page.Error.Message, "401") {
		t.Errorf("no key: %+v", page.Error)
	}
	before := sim.Stats().Requests["parallel-extract"]
	if page, _ = p.Fetch(ctx, "ftp://example.org/a"); page.Error == nil || page.Error.Type != fetch.ErrInvalidURL || sim.Stats().Requests["parallel-extract"] != before {
		t.Errorf("bad URL: %+v, calls %d → %d", page.Error, before, sim.Stats().Requests["parallel-extract"])
	}
}
