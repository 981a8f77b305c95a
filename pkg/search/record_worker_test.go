package search_test

import (
	"context"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A failed search is neither cached nor recorded: the next identical search asks the
// engine again. A successful one is both: the next is answered from the cache, and
// the job's record holds it under the search's content address.
func TestOnlyCompleteResultsAreCachedAndRecorded(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", map[string]search.Settings{"brave": {CacheTTL: time.Minute}}, nil, r.cfgs["brave"])
	ctx := context.Background()
	n := 0
	run := func(query string) search.Request {
		t.Helper()
		n++
		id := "job" + string(rune('a'+n))
		dl := time.Now().Add(time.Minute)
		if err := r.store.Jobs.CreateJob(ctx, &state.Job{ID: id, Kind: "chat", Model: "m", Deadline: dl}); err != nil {
			t.Fatal(err)
		}
		req := search.Request{JobID: id, CallID: "c1", Engine: "brave", Query: engines.Query{Query: query}, Deadline: dl}
		handle(t, w, req, 5) // the last delivery: a failure is answered at once
		return req
	}
	requests := func() int64 { return r.sim.Stats().Requests["brave"] }

	failed := run("news today sim:500")
	before := requests()
	run("news today sim:500")
	if requests() == before {
		t.Error("a failed search was answered from the cache")
	}
	if rec, err := r.store.Searches.RecordedSearches(ctx, failed.JobID); err != nil || len(rec) != 0 {
		t.Errorf("a failed search was recorded: %v %v", rec, err)
	}

	ok := run("news today")
	before = requests()
	run("news today")
	if requests() != before {
		t.Error("a successful search was not cached")
	}
	rec, err := r.store.Searches.RecordedSearches(ctx, ok.JobID)
	if err != nil || len(rec) != 1 || rec[search.Address("brave", ok.Query)] == nil {
		t.Errorf("the job's record: %v %v", rec, err)
	}
}
