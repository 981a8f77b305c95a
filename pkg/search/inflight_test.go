package search_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Identical searches in flight on two search workers (each on its own NATS
// connection, as two processes are) are paid once within a tenant: of two tenants'
// two identical searches each, running at once, the engine sees one call per
// tenant; every call gets its result, and each tenant's second is free.
func TestIdenticalSearchesInFlightArePaidOncePerTenant(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w1 := r.worker("w1", nil, nil, r.cfgs["brave"])
	w2 := r.worker("w2", nil, nil, r.cfgs["brave"])
	w2.Bus = bustest.Connect(t, r.natsURL)
	dl := time.Now().Add(time.Minute)
	q := engines.Query{Query: "acme merger rumours sim:slow=400ms"}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, tenant := range []string{"tenant-a", "tenant-a", "tenant-b", "tenant-b"} {
		job := fmt.Sprintf("j-inflight-%d", i)
		if err := r.store.Jobs.CreateJob(context.Background(), &state.Job{ID: job, Tenant: tenant, Kind: "chat", Model: "m", Deadline: dl}); err != nil {
			t.Fatal(err)
		}
		w := []*search.Worker{w1, w2}[i%2]
		req := search.Request{JobID: job, CallID: "c1", Engine: "brave", Query: q, Deadline: dl}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.Handle(context.Background(), &bus.Delivery[search.Request]{Msg: req, Attempt: 1, MaxDeliver: 5})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := r.sim.Stats().Requests["brave"]; got != 2 {
		t.Fatalf("brave called %d times for two tenants' two identical searches each, want 2", got)
	}
	paid := map[string]int{}
	for i := range 4 {
		id := fmt.Sprintf("j-inflight-%d", i)
		b, err := r.store.Searches.StartSearch(context.Background(), id, 0, "c1", "check", time.Second)
		if err != nil || b.Done == nil {
			t.Fatalf("%s: no stored result (%v)", id, err)
		}
		done, _, err := bus.Decode[search.Done](b.Done)
		if err != nil {
			t.Fatal(err)
		}
		if done.Result.Citation.Error != nil || len(done.Result.Hits) == 0 {
			t.Fatalf("%s: result %+v", id, done.Result)
		}
		tenant := []string{"tenant-a", "tenant-a", "tenant-b", "tenant-b"}[i]
		paid[tenant] += done.Result.Usage.Searches
	}
	if paid["tenant-a"] != 1 || paid["tenant-b"] != 1 {
		t.Errorf("paid searches by tenant %v, want one each", paid)
	}
	shared := testutil.ToFloat64(w1.Metrics.Searches.WithLabelValues("brave", "shared")) + testutil.ToFloat64(w2.Metrics.Searches.WithLabelValues("brave", "shared"))
	if shared != 2 {
		t.Errorf("%v searches shared, want 2", shared)
	}
}
