package webhook

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// receiver is a callback receiver that counts each webhook-id it is sent, optionally
// holding every request until it is released.
type receiver struct {
	url     string
	release chan struct{} // nil: answers at once

	mu      sync.Mutex
	hits    map[string]int
	waiting int // requests held now
	maxWait int // most requests held at once
}

func newReceiver(t *testing.T, hang bool) *receiver {
	r := &receiver{hits: map[string]int{}}
	if hang {
		r.release = make(chan struct{})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits[req.Header.Get("webhook-id")]++
		r.waiting++
		r.maxWait = max(r.maxWait, r.waiting)
		r.mu.Unlock()
		if r.release != nil {
			select {
			case <-r.release:
			case <-req.Context().Done():
			}
		}
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/hook"
	return r
}

// counts returns how many webhook-ids arrived, how many arrived more than once, and
// the most requests held at once.
func (r *receiver) counts() (ids, repeated, maxWait int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.hits {
		if n > 1 {
			repeated++
		}
	}
	return len(r.hits), repeated, r.maxWait
}

// waitFor polls cond until it holds or the bound passes (a bound on progress, far
// above what the work needs, not a measurement).
func waitFor(t *testing.T, bound time.Duration, cond func() bool) bool {
	t.Helper()
	for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// One tenant's hanging receiver does not hold the delivery pool: with tenant A's 120
// callbacks hanging (more than the pool of 64), all of tenant B's are delivered while
// A's receiver is still blocked, A never has more than its cap in progress, and once
// A's receiver recovers every one of A's webhooks arrives exactly once.
func TestSlowTenantDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	const nA, nB = 120, 20
	h := newHarness(t, Config{Timeout: 5 * time.Minute, TenantInFlight: 8, Defer: 100 * time.Millisecond})
	slow, fast := newReceiver(t, true), newReceiver(t, false)
	ctx := t.Context()
	var jobsA, jobsB []string
	// A's deliveries are queued first: on one shared pool they take every worker.
	for range nA {
		job, _ := h.finishedJob(t, "tenant-a", map[string]any{"url": slow.url})
		if err := h.s.JobFinished(ctx, job); err != nil {
			t.Fatal(err)
		}
		jobsA = append(jobsA, job.ID)
	}
	for range nB {
		job, _ := h.finishedJob(t, "tenant-b", map[string]any{"url": fast.url})
		if err := h.s.JobFinished(ctx, job); err != nil {
			t.Fatal(err)
		}
		jobsB = append(jobsB, job.ID)
	}
	w, err := bus.Consume(ctx, h.s.Bus, bus.WebhookConsumer(bus.TimingFor(bus.ConsumerWebhooks)), h.s.Handle,
		bus.ConsumeOptions{Concurrency: h.s.Config.PoolSize()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	released := false
	t.Cleanup(func() {
		if !released {
			close(slow.release)
		}
	})

	bDone := waitFor(t, time.Minute, func() bool { n, _, _ := fast.counts(); return n == nB })
	gotB, _, _ := fast.counts()
	gotA, _, heldA := slow.counts()
	if !bDone {
		t.Fatalf("with tenant A's receiver hanging (%d of its requests held), tenant B got %d of %d webhooks", gotA, gotB, nB)
	}
	if heldA > 8 {
		t.Errorf("tenant A had %d deliveries in progress at once, over its cap of 8", heldA)
	}
	if d := testutil.ToFloat64(h.s.Metrics.WebhookDeferred.WithLabelValues("tenant-a", deferTenant)); d == 0 {
		t.Error("no deferral of tenant A was counted")
	}

	// A's receiver recovers: every one of its webhooks arrives, once.
	close(slow.release)
	released = true
	if !waitFor(t, 3*time.Minute, func() bool { n, _, _ := slow.counts(); return n == nA }) {
		n, _, _ := slow.counts()
		t.Fatalf("tenant A got %d of %d webhooks after its receiver recovered", n, nA)
	}
	for _, id := range append(jobsA, jobsB...) {
		if !waitFor(t, 30*time.Second, func() bool { return webhookStatus(t, h.s, id) == StatusDelivered }) {
			t.Errorf("job %s: webhook status %q, want delivered", id, webhookStatus(t, h.s, id))
		}
	}
	for name, r := range map[string]*receiver{"A": slow, "B": fast} {
		if _, rep, _ := r.counts(); rep != 0 {
			t.Errorf("tenant %s: %d webhooks arrived more than once", name, rep)
		}
	}
	if r, f := testutil.ToFloat64(h.s.Metrics.Webhooks.WithLabelValues("retry")), testutil.ToFloat64(h.s.Metrics.Webhooks.WithLabelValues("failed")); r != 0 || f != 0 {
		t.Errorf("%v retries and %v failures: a hold-back is not an attempt", r, f)
	}
}

// A hold-back is not an attempt: a delivery redelivered after being held back keeps
// its place in the retry schedule, and gives up only after every real try.
func TestHoldBackKeepsRetrySchedule(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{TenantInFlight: 1})
	h.reply = func(int) int { return http.StatusInternalServerError }
	job, _ := h.finishedJob(t, "default", nil)
	if err := h.s.JobFinished(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	d := enqueued(t, h.s)[0]
	h.s.init()
	// Another delivery of the tenant holds its one place: this one is held back, 5 times.
	done, _ := h.s.fair.acquire("default", "elsewhere:1")
	for n := 1; n <= 5; n++ {
		err := h.s.Handle(t.Context(), attempt(d, n))
		if dec := bus.Decide(err, n, -1); dec.Action != bus.Nak || dec.Delay <= 0 {
			t.Fatalf("held back on delivery %d: %v after %v, want a delayed nak", n, dec.Action, dec.Delay)
		}
	}
	done(true)
	if got := len(h.received()); got != 0 {
		t.Fatalf("%d requests while held back", got)
	}
	// Delivery 6 is attempt 1: it waits Schedule[0]; delivery 9 is attempt 4, the last.
	for n := 6; n <= 9; n++ {
		err := h.s.Handle(t.Context(), attempt(d, n))
		dec := bus.Decide(err, n, -1)
		if try := n - 5; try <= 3 {
			if dec.Action != bus.Nak || dec.Delay != h.s.Config.Schedule[try-1] {
				t.Errorf("attempt %d: %v after %v, want nak after %v", try, dec.Action, dec.Delay, h.s.Config.Schedule[try-1])
			}
			continue
		}
		if dec.Action != bus.TermDLQ {
			t.Errorf("last attempt: %v, want term+dlq", dec.Action)
		}
	}
	if got := len(h.received()); got != 4 {
		t.Errorf("%d requests, want the 4 tries", got)
	}
	if d := testutil.ToFloat64(h.s.Metrics.WebhookDeferred.WithLabelValues("default", deferTenant)); d != 5 {
		t.Errorf("%v hold-backs counted, want 5", d)
	}
}

// A destination that fails gets fewer deliveries at once, down to one, and its limit
// grows back as it answers; a tenant's cap counts across its destinations.
func TestDestinationBackPressure(t *testing.T) {
	t.Parallel()
	f := newFairness(100, 4)
	take := func(tenant, host string) func(bool) {
		done, _ := f.acquire(tenant, host)
		return done
	}
	var held []func(bool)
	for range 4 {
		held = append(held, take("a", "slow:1"))
	}
	if _, why := f.acquire("b", "slow:1"); why != deferHost {
		t.Fatalf("a 5th delivery to a host capped at 4: %q, want held back for the destination", why)
	}
	if take("b", "other:1") == nil {
		t.Fatal("another destination was held back")
	}
	for _, done := range held {
		done(false) // 4 failures: 4 → 2 → 1 → 1 → 1
	}
	if take("a", "slow:1") == nil {
		t.Fatal("a failing host got no delivery at all")
	}
	if _, why := f.acquire("a", "slow:1"); why != deferHost {
		t.Errorf("a failing host got 2 deliveries at once (%q)", why)
	}
	f2 := newFairness(2, 100)
	take2 := func(host string) string { _, why := f2.acquire("a", host); return why }
	if take2("x:1") != "" || take2("y:1") != "" || take2("z:1") != deferTenant {
		t.Error("a tenant's cap does not count across its destinations")
	}
}

// A tenant whose deliveries fail at a shared host lowers only its own share of it:
// another tenant still gets the host's whole cap less what the first has in flight,
// and the host's cap is shared by both.
func TestFailingTenantLowersOnlyItsShare(t *testing.T) {
	t.Parallel()
	f := newFairness(100, 4)
	for range 3 {
		done, why := f.acquire("a", "hooks:443")
		if done == nil {
			t.Fatalf("a's delivery held back (%q)", why)
		}
		done(false) // 4 → 2 → 1 → 1
	}
	aHeld, _ := f.acquire("a", "hooks:443")
	if aHeld == nil {
		t.Fatal("a failing tenant got no delivery at all")
	}
	if _, why := f.acquire("a", "hooks:443"); why != deferHost {
		t.Fatalf("a failing tenant got 2 deliveries at once (%q)", why)
	}
	for i := range 3 {
		if done, why := f.acquire("b", "hooks:443"); done == nil {
			t.Fatalf("b's delivery %d to the shared host held back (%q) by a's failures", i+1, why)
		}
	}
	if _, why := f.acquire("b", "hooks:443"); why != deferHost {
		t.Errorf("the host's cap of 4 is not shared: a 5th delivery there was %q", why)
	}
}
