package search_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/netguard"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A fetched page is recorded under its URL's content address, whole (the result and
// the page a replay renders), and a page without readable text too: it is what the
// URL serves. A failed fetch is not recorded.
func TestFetchWorkerRecordsPagesNotFailures(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/missing":
			http.NotFound(w, req)
		case "/shell":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><title>App</title></head><body><div id="root"></div><script src="/app.js"></script></body></html>`)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><title>Notes</title></head><body><p>Version 2 is out.</p></body></html>`)
		}
	}))
	t.Cleanup(srv.Close)
	w := &search.FetchWorker{Bus: r.bus, Store: r.store.Searches, LeaseTTL: 3 * time.Second, Log: slog.New(slog.DiscardHandler), ID: "w1",
		Fetcher: fetch.New(fetch.Options{Guard: &netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})}
	ctx := context.Background()
	if err := r.store.Jobs.CreateJob(ctx, &state.Job{ID: "j-rec", Kind: "chat", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	for i, path := range []string{"/notes", "/missing", "/shell"} {
		req := search.FetchRequest{JobID: "j-rec", CallID: fmt.Sprintf("f%d", i), URL: srv.URL + path}
		if err := w.Handle(ctx, &bus.Delivery[search.FetchRequest]{Msg: req, Attempt: 1, MaxDeliver: 5}); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	rec, err := r.store.Searches.RecordedSearches(ctx, "j-rec")
	if err != nil || len(rec) != 2 {
		t.Fatalf("record %v %v", rec, err)
	}
	if _, ok := rec[search.FetchAddress(srv.URL+"/missing")]; ok {
		t.Error("a failed fetch was recorded")
	}
	notes, ok := search.ReadFetchRecord(rec[search.FetchAddress(srv.URL+"/notes")])
	if !ok || notes.Page.Text != "Version 2 is out." || len(notes.Result.Citation.Sources) != 1 || notes.Result.Citation.Sources[0].Web.Title != "Notes" {
		t.Errorf("recorded page %+v", notes)
	}
	if shell, ok := search.ReadFetchRecord(rec[search.FetchAddress(srv.URL+"/shell")]); !ok || shell.Page.Kind != fetch.KindJSShell {
		t.Errorf("recorded shell %+v", shell)
	}
}
