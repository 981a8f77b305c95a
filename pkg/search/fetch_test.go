package search_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/netguard"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A fetch is made once however often its message is delivered: the first delivery
// stores the page and publishes it as a one-source result; a redelivery republishes
// the stored result without reading the page again. A fetch for an ended job is not
// made.
func TestFetchWorkerFetchesOnceAndPublishesThePage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var hits atomic.Int32
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Notes</title></head><body><p>Version 2 is out.</p></body></html>`)
	}))
	t.Cleanup(page.Close)
	m := metrics.New()
	w := &search.FetchWorker{Bus: r.bus, Store: r.store.Searches, LeaseTTL: 3 * time.Second, Metrics: m, Log: slog.New(slog.DiscardHandler), ID: "w1",
		Fetcher: fetch.New(fetch.Options{Guard: &netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})}
	ctx := context.Background()
	if err := r.store.Jobs.CreateJob(ctx, &state.Job{ID: "j-fetch", Kind: "chat", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	req := search.FetchRequest{JobID: "j-fetch", CallID: "f1", URL: page.URL + "/notes"}
	for attempt := 1; attempt <= 2; attempt++ {
		if err := w.Handle(ctx, &bus.Delivery[search.FetchRequest]{Msg: req, Attempt: attempt, MaxDeliver: 5}); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
	if hits.Load() != 1 {
		t.Fatalf("page read %d times", hits.Load())
	}
	n, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
	if n != 1 || done.Engine != search.FetchEngine || done.Page == nil || done.Page.Text != "Version 2 is out." || done.Page.Title != "Notes" {
		t.Fatalf("%d resumes, last %+v", n, done)
	}
	if srcs := done.Result.Citation.Sources; len(srcs) != 1 || srcs[0].Web.URI != req.URL || srcs[0].Web.Title != "Notes" {
		t.Fatalf("sources %+v", srcs)
	}

	if _, err := r.store.Jobs.Finish(ctx, "j-fetch", state.Cancelled); err != nil {
		t.Fatal(err)
	}
	other := req
	other.CallID = "f2"
	if err := w.Handle(ctx, &bus.Delivery[search.FetchRequest]{Msg: other, Attempt: 1, MaxDeliver: 5}); err != nil || hits.Load() != 1 {
		t.Fatalf("fetch for a cancelled job: err %v, page read %d times", err, hits.Load())
	}
}
