package fleet_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
)

// A replay of a job that fetched a page reads the page from the original job's
// record: the page server sees no second request, and the replay yields the same
// sources, its trace naming the record under the original's content address.
func TestReplayReadsFetchedPagesFromTheRecord(t *testing.T) {
	t.Parallel()
	f := fetchFleet(t)
	var hits atomic.Int32
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>Release Notes</title></head><body><main><h1>Release Notes</h1><p>Version 2 reads pages once.</p></main></body></html>`)
	}))
	t.Cleanup(page.Close)
	url := page.URL + "/notes"
	c := batchClient{t: t, url: f.URL}

	orig := submitAndWait(t, c, "Read "+url+" and summarise it sim:fetch")
	if orig.Status != "completed" || len(orig.Trace) != 1 || len(orig.Trace[0].Result) != 64 || hits.Load() != 1 || orig.Usage.Fetches != 1 || orig.Usage.FetchesCached != 0 {
		t.Fatalf("original (page read %d times): %+v", hits.Load(), orig)
	}
	rep := replay(t, c, orig.ID)
	if hits.Load() != 1 {
		t.Errorf("the replay read the page again (%d requests)", hits.Load())
	}
	if rep.Status != "completed" || len(rep.Trace) != 1 || rep.Usage.Fetches != 0 || rep.Usage.FetchesCached != 1 {
		t.Fatalf("replay: %+v", rep)
	}
	oa, ot := orig.sourceURLs()
	ra, rt := rep.sourceURLs()
	if !slices.Contains(oa, url) || !slices.Equal(oa, ra) || !slices.Equal(ot, rt) {
		t.Errorf("sources differ:\noriginal %v / %v\nreplay   %v / %v", oa, ot, ra, rt)
	}
	if e := rep.Trace[0]; e.Worker != "replay" || e.Result != orig.Trace[0].Result || e.Error != "" {
		t.Errorf("replay trace entry %+v, original %+v", e, orig.Trace[0])
	}
}
