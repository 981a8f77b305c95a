package search_test

import (
	"context"
	"fmt"
	"net/http"
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
		return searchAs(t, r, w, "tenant-f", "brave", q, dl, n)
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

// searchAs runs one search of engine for tenant, as the n-th job of a test, and
// returns its outcome.
func searchAs(t *testing.T, r *rig, w *search.Worker, tenant, engine string, q engines.Query, dl time.Time, n int) search.Done {
	t.Helper()
	job := fmt.Sprintf("j-%s-%s-%d", t.Name(), tenant, n)
	if err := r.store.Jobs.CreateJob(context.Background(), &state.Job{ID: job, Tenant: tenant, Kind: "chat", Model: "m", Deadline: dl}); err != nil {
		t.Fatal(err)
	}
	handle(t, w, search.Request{JobID: job, CallID: "c1", Engine: engine, Query: q, Deadline: dl}, 1)
	_, done := stored[search.Done](t, r.bus, bus.StreamChat, bus.SubjectResume)
	if done.JobID != job {
		t.Fatalf("last resume is for %s, want %s", done.JobID, job)
	}
	return done
}

// The cache is per tenant: one tenant's search is not another's hit, unless the
// operator shares the engine's cache. An error and a partial answer (a SearXNG
// backend that did not answer) are never cached.
func TestSearchCacheScope(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	own := r.worker("w1", map[string]search.Settings{"brave": {CacheTTL: time.Minute}, "searxng": {CacheTTL: time.Minute}}, nil, r.cfgs["brave"], r.cfgs["searxng"])
	shared := r.worker("w2", map[string]search.Settings{"brave": {CacheTTL: time.Minute, SharedCache: true}}, nil, r.cfgs["brave"])
	dl := time.Now().Add(time.Minute)
	n := 0
	run := func(w *search.Worker, tenant, engine, query string) search.Done {
		n++
		return searchAs(t, r, w, tenant, engine, engines.Query{Query: query}, dl, n)
	}
	calls := func(kind string) int { return int(r.sim.Stats().Requests[kind]) }

	run(own, "t-a", "brave", "tide tables of Brest")
	if d := run(own, "t-b", "brave", "tide tables of Brest"); d.Result.Usage.Cached != 0 || calls("brave") != 2 {
		t.Errorf("another tenant's identical search: usage %+v, %d calls; want its own paid search", d.Result.Usage, calls("brave"))
	}
	if d := run(own, "t-a", "brave", "tide tables of Brest"); d.Result.Usage.Cached != 1 || calls("brave") != 2 {
		t.Errorf("the same tenant again: usage %+v, %d calls; want a hit", d.Result.Usage, calls("brave"))
	}

	run(shared, "t-a", "brave", "tide tables of Quimper")
	if d := run(shared, "t-b", "brave", "tide tables of Quimper"); d.Result.Usage.Cached != 1 || calls("brave") != 3 {
		t.Errorf("shared cache, another tenant: usage %+v, %d calls; want a hit", d.Result.Usage, calls("brave"))
	}

	r.sim.SetFault("/brave", http.StatusBadRequest, 0, 1)
	if d := run(own, "t-a", "brave", "tide tables of Vannes"); d.Result.Citation.Error == nil {
		t.Fatalf("the fault did not fail the search: %+v", d.Result)
	}
	if d := run(own, "t-a", "brave", "tide tables of Vannes"); d.Result.Citation.Error != nil || d.Result.Usage.Searches != 1 {
		t.Errorf("after an error: %+v; want a paid search, the error not cached", d.Result.Usage)
	}

	before := calls("searxng")
	for range 2 {
		if d := run(own, "t-a", "searxng", "sim:fixture tide tables"); !d.Result.Partial || d.Result.Usage.Cached != 0 {
			t.Errorf("SearXNG with a backend down: partial %v, usage %+v; want a partial, paid answer", d.Result.Partial, d.Result.Usage)
		}
	}
	if got := calls("searxng") - before; got != 2 {
		t.Errorf("%d SearXNG calls for two identical partial searches, want 2 (partial answers are not cached)", got)
	}
}
