package search_test

import (
	"context"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// max_age bounds a cached result's age: 0 makes a paid search although a result is
// cached, a bound the cached result is within answers from the cache; cache "only"
// answers from the cache, or, with nothing cached, says so without a paid search; and
// that miss is not cached.
func TestSearchFreshnessPerRequest(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", map[string]search.Settings{"brave": {CacheTTL: time.Minute}}, nil, r.cfgs["brave"])
	dl := time.Now().Add(time.Minute)
	n := 0
	run := func(q engines.Query) search.Done {
		t.Helper()
		n++
		job := "j-fresh-" + string(rune('a'+n))
		if err := r.store.Jobs.CreateJob(context.Background(), &state.Job{ID: job, Tenant: "tenant-f", Kind: "chat", Model: "m", Deadline: dl}); err != nil {
			t.Fatal(err)
		}
		handle(t, w, search.Request{JobID: job, CallID: "c1", Engine: "brave", Query: q, Deadline: dl}, 1)
		_, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
		if done.JobID != job {
			t.Fatalf("last resume is for %s, want %s", done.JobID, job)
		}
		return done
	}
	calls := func() int { return int(r.sim.Stats().Requests["brave"]) }
	zero, hour := 0, 3600
	q := engines.Query{Query: "tide tables of Brest"}

	if d := run(engines.Query{Query: "never searched", Cache: engines.CacheOnly}); d.Result.Citation.Error == nil || calls() != 0 {
		t.Fatalf("cache only with nothing cached: error %v, %d paid calls; want an error result and none", d.Result.Citation.Error, calls())
	}
	if d := run(engines.Query{Query: "never searched", Cache: engines.CacheOnly}); d.Result.Citation.Error == nil || calls() != 0 {
		t.Fatalf("cache only again: the miss was cached or searched (%d calls)", calls())
	}
	if d := run(q); d.Result.Usage.Searches != 1 || calls() != 1 {
		t.Fatalf("first search: usage %+v, %d calls", d.Result.Usage, calls())
	}
	if d := run(q); d.Result.Usage.Searches != 0 || d.Result.Usage.Cached != 1 || calls() != 1 {
		t.Errorf("repeat: usage %+v, %d calls; want a cache hit", d.Result.Usage, calls())
	}
	fresh := q
	fresh.MaxAge = &zero
	if d := run(fresh); d.Result.Usage.Searches != 1 || calls() != 2 {
		t.Errorf("max_age 0: usage %+v, %d calls; want a paid search", d.Result.Usage, calls())
	}
	recent := q
	recent.MaxAge = &hour
	if d := run(recent); d.Result.Usage.Searches != 0 || calls() != 2 {
		t.Errorf("max_age 3600 on a result seconds old: usage %+v, %d calls; want a cache hit", d.Result.Usage, calls())
	}
	only := q
	only.Cache = engines.CacheOnly
	if d := run(only); d.Result.Citation.Error != nil || d.Result.Usage.Searches != 0 || calls() != 2 {
		t.Errorf("cache only with a cached result: %+v, %d calls", d.Result, calls())
	}
}
