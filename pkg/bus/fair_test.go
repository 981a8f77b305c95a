package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
)

// The fair-share tests: lanes of the JOBS family on an embedded JetStream. Handlers
// hold their slot until the test lets them go, so every assertion is about which
// messages started, never about how long anything took.

// floor records the messages that started, by tenant, and holds each until released.
type floor struct {
	mu      sync.Mutex
	started []string // "tenant/id" in start order
	running map[string]int
	hold    map[string]chan struct{} // tenant → its handlers wait on it (nil: run through)
	changed chan struct{}
}

func newFloor(held ...string) *floor {
	f := &floor{running: map[string]int{}, hold: map[string]chan struct{}{}, changed: make(chan struct{}, 1)}
	for _, t := range held {
		f.hold[t] = make(chan struct{}, 1000)
	}
	return f
}

func (f *floor) handler(ctx context.Context, d *bus.Delivery[bus.ChatJob]) error {
	f.mu.Lock()
	f.started = append(f.started, d.Msg.Tenant+"/"+d.Msg.JobID)
	f.running[d.Msg.Tenant]++
	hold := f.hold[d.Msg.Tenant]
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	f.running[d.Msg.Tenant]--
	f.mu.Unlock()
	return nil
}

// release lets n of tenant's held handlers finish.
func (f *floor) release(tenant string, n int) {
	for range n {
		f.hold[tenant] <- struct{}{}
	}
}

func (f *floor) snapshot() ([]string, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := map[string]int{}
	for k, v := range f.running {
		run[k] = v
	}
	return append([]string(nil), f.started...), run
}

// count is how many of started belong to tenant (and, if given, to its batch).
func count(started []string, tenant, batch string) int {
	n := 0
	for _, s := range started {
		if strings.HasPrefix(s, tenant+"/") && (batch == "" || strings.Contains(s, "/"+batch+"-")) {
			n++
		}
	}
	return n
}

func publishLane(t *testing.T, b *bus.Bus, band, tenant, batch string, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%s-%d", band, tenant, i)
		if batch != "" {
			id = fmt.Sprintf("%s-%d", batch, i)
		}
		if err := b.Publish(context.Background(), bus.SubjectJob(band, tenant, batch), bus.ChatJob{JobID: id, Tenant: tenant}); err != nil {
			t.Fatal(err)
		}
	}
}

func consumeFair(t *testing.T, b *bus.Bus, slots int, shares bus.Shares, f *floor) {
	t.Helper()
	spec := bus.JobLanes(bus.Timing{AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 1000}, 0)
	w, err := bus.ConsumeFair(context.Background(), b, spec, shares, f.handler, bus.ConsumeOptions{Concurrency: slots, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// A tenant that floods a process's slots leaves the reserve free: a second tenant's
// job starts while every one of the flood's is still held, long before its backlog
// drains.
func TestFairFloodLeavesRoomForAnotherTenant(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	f := newFloor("flood")
	publishLane(t, b, bus.BandAsync, "flood", "", 100)
	consumeFair(t, b, 16, nil, f)
	eventually(t, "the flood to fill its slots", func() bool { _, run := f.snapshot(); return run["flood"] == 14 })
	ivyPassesTheFlood(t, f, b)
	f.release("flood", 100)
	eventually(t, "the flood to drain", func() bool { s, _ := f.snapshot(); return count(s, "flood", "") == 100 })
}

// ivyPassesTheFlood publishes ivy's 3 jobs on b while 14 of the flood's 100 are held,
// and checks that all of ivy's run while the flood starts no more: 86 of its jobs
// wait in the stream (the family's backlog counts its lanes'), 14 are held.
func ivyPassesTheFlood(t *testing.T, f *floor, b *bus.Bus) {
	t.Helper()
	publishLane(t, b, bus.BandAsync, "ivy", "", 3)
	eventually(t, "ivy's jobs to run", func() bool { s, _ := f.snapshot(); return count(s, "ivy", "") == 3 })
	started, run := f.snapshot()
	if n := count(started, "flood", ""); n != 14 || run["flood"] != 14 {
		t.Fatalf("the flood started %d jobs (%d running) while ivy's ran; want 14 of its 100, all still held", n, run["flood"])
	}
	eventually(t, "ivy's jobs acknowledged, the flood's waiting", func() bool {
		lag, err := b.FamilyLag(context.Background(), bus.StreamJobs, bus.ConsumerChat)
		return err == nil && lag.Pending == 86 && lag.AckPending == 14
	})
}

// When several tenants wait, a freed slot goes to the one furthest below its share,
// in proportion to the tenants' weights.
func TestFairNextSlotGoesFurthestBelowShare(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	f := newFloor("heavy", "light", "late")
	publishLane(t, b, bus.BandAsync, "heavy", "", 50)
	publishLane(t, b, bus.BandAsync, "light", "", 50)
	shares := func(tenant string) bus.Share {
		if tenant == "heavy" {
			return bus.Share{Weight: 3}
		}
		return bus.Share{Weight: 1}
	}
	consumeFair(t, b, 8, shares, f)
	eventually(t, "the slots to fill", func() bool { _, run := f.snapshot(); return run["heavy"]+run["light"] >= 7 })
	_, run := f.snapshot()
	if run["heavy"] < 2*run["light"] || run["light"] < 2 || run["heavy"] > 6 {
		t.Fatalf("running heavy %d, light %d: want about 3:1 of 8 slots (light ≥ 2, heavy ≤ its share of 6)", run["heavy"], run["light"])
	}
	// A third tenant finds the reserved slot while both floods are held.
	publishLane(t, b, bus.BandAsync, "late", "", 1)
	eventually(t, "the late tenant's job to start", func() bool { _, run := f.snapshot(); return run["late"] == 1 })
	f.release("heavy", 50)
	f.release("light", 50)
	f.release("late", 1)
	eventually(t, "everything to run", func() bool { s, _ := f.snapshot(); return len(s) == 101 })
}

// Bands order work: every sync job starts before any async one, every async one
// before any batch line, whatever the order they were published in.
func TestFairBandsOrderWork(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	f := newFloor()
	publishLane(t, b, bus.BandBatch, "t1", "b1", 5)
	publishLane(t, b, bus.BandAsync, "t1", "", 5)
	publishLane(t, b, bus.BandSync, "t2", "", 5)
	publishLane(t, b, bus.BandAsync, "t2", "", 5)
	publishLane(t, b, bus.BandSync, "t1", "", 5)
	consumeFair(t, b, 1, nil, f)
	eventually(t, "every job to run", func() bool { s, _ := f.snapshot(); return len(s) == 25 })
	started, _ := f.snapshot()
	rank := func(s string) int {
		_, id, _ := strings.Cut(s, "/")
		switch {
		case strings.HasPrefix(id, "sync-"):
			return 0
		case strings.HasPrefix(id, "async-"):
			return 1
		}
		return 2
	}
	for i := 1; i < len(started); i++ {
		if rank(started[i]) < rank(started[i-1]) {
			t.Fatalf("%s started after %s: %v", started[i], started[i-1], started)
		}
	}
}

// Batch lines are taken round robin across tenants and across one tenant's batches:
// a small batch behind two large ones of another tenant is done within its first
// turns, and the large ones advance alike.
func TestFairBatchLinesRoundRobin(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	f := newFloor()
	publishLane(t, b, bus.BandBatch, "big", "batch_a1", 40)
	publishLane(t, b, bus.BandBatch, "big", "batch_a2", 40)
	publishLane(t, b, bus.BandBatch, "ivy", "batch_i1", 5)
	consumeFair(t, b, 1, nil, f)
	eventually(t, "every line to run", func() bool { s, _ := f.snapshot(); return len(s) == 85 })
	started, _ := f.snapshot()
	first := started[:10]
	if n := count(first, "ivy", ""); n != 5 {
		t.Fatalf("ivy's 5 lines: %d within the first 10 lines taken, want all (%v)", n, first)
	}
	if a1, a2 := count(first, "big", "batch_a1"), count(first, "big", "batch_a2"); a1-a2 > 1 || a2-a1 > 1 {
		t.Fatalf("big's batches within the first 10 lines: %d and %d, want alike (%v)", a1, a2, first)
	}
}

// A lane's dead letters are filed under the family's consumer name, and the family's
// own consumer is never made: its work is all in the lanes.
func TestFairDeadLettersFiledUnderFamily(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	dl := deadLetters(t, b)
	publishLane(t, b, bus.BandSync, "t", "", 1)
	spec := bus.JobLanes(bus.Timing{AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 100}, 0)
	w, err := bus.ConsumeFair(context.Background(), b, spec, nil, func(context.Context, *bus.Delivery[bus.ChatJob]) error {
		return bus.Permanent(errors.New("poison"))
	}, bus.ConsumeOptions{Concurrency: 2, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	eventually(t, "a dead letter", func() bool { return len(dl()) == 1 })
	if d := dl()[0]; d.Consumer != bus.ConsumerChat || d.Subject != bus.SubjectJob(bus.BandSync, "t", "") {
		t.Fatalf("dead letter filed under %q from %q, want %q", d.Consumer, d.Subject, bus.ConsumerChat)
	}
	if _, err := b.ConsumerLag(context.Background(), bus.StreamJobs, bus.ConsumerChat); err == nil {
		t.Fatal("the family's own consumer exists; only its lanes' should")
	}
}

func TestLowerBand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		given, asked, want string
		ok                 bool
	}{
		{bus.BandSync, "", bus.BandSync, true},
		{bus.BandSync, "batch", bus.BandBatch, true},
		{bus.BandSync, " Async ", bus.BandAsync, true},
		{bus.BandAsync, "sync", bus.BandAsync, true},
		{bus.BandBatch, "async", bus.BandBatch, true},
		{bus.BandAsync, "urgent", bus.BandAsync, false},
	} {
		if got, ok := bus.LowerBand(c.given, c.asked); got != c.want || ok != c.ok {
			t.Errorf("LowerBand(%q, %q) = %q, %v; want %q, %v", c.given, c.asked, got, ok, c.want, c.ok)
		}
	}
}

func TestLaneSubjects(t *testing.T) {
	t.Parallel()
	if s := bus.SubjectJob(bus.BandBatch, "acme", "batch_1"); s != "fleet.jobs.v1.chat.batch.acme.batch_1" {
		t.Fatal(s)
	}
	if s := bus.SubjectSearchOf("brave", bus.BandSync, "a.b c"); bus.EngineOfSubject(s) != "brave" || bus.BandOfSubject(s) != bus.BandSync || strings.Count(s, ".") != 5 {
		t.Fatal(s)
	}
	if bus.EngineOfSubject(bus.SubjectSearch("brave")) != "brave" || bus.BandOfSubject(bus.SubjectResume) != "" {
		t.Fatal("a subject that is no lane has no band")
	}
	if s := bus.SubjectJob("", "acme", ""); s != bus.SubjectJob(bus.BandAsync, "acme", "") {
		t.Fatalf("a job without a band: %s, want the async lane", s)
	}
}

// Shares are kept by each worker process among its own slots, on lanes every process
// reads: with two processes on one server, a flooding tenant fills each process up
// to its reserve (so it uses both), its excess waits in the stream, and another
// tenant's jobs start in the reserved slots while every one of the flood's is held.
func TestFairSharesAcrossProcesses(t *testing.T) {
	t.Parallel()
	b1, url := bustest.New(t)
	b2 := bustest.Connect(t, url)
	f := newFloor("flood")
	publishLane(t, b1, bus.BandAsync, "flood", "", 100)
	var mu sync.Mutex
	byProcess := map[string]int{} // "process/tenant" → jobs started there
	for i, b := range []*bus.Bus{b1, b2} {
		spec := bus.JobLanes(bus.Timing{AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 1000}, 0)
		w, err := bus.ConsumeFair(context.Background(), b, spec, nil, func(ctx context.Context, d *bus.Delivery[bus.ChatJob]) error {
			mu.Lock()
			byProcess[fmt.Sprintf("%d/%s", i, d.Msg.Tenant)]++
			mu.Unlock()
			return f.handler(ctx, d)
		}, bus.ConsumeOptions{Concurrency: 8, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	// 8 slots a process, one kept in reserve: 7 of the flood's in each.
	eventually(t, "the flood to fill both processes", func() bool { _, run := f.snapshot(); return run["flood"] == 14 })
	mu.Lock()
	if byProcess["0/flood"] != 7 || byProcess["1/flood"] != 7 {
		t.Fatalf("the flood's jobs by process: %v, want 7 in each", byProcess)
	}
	mu.Unlock()
	ivyPassesTheFlood(t, f, b2)
	f.release("flood", 100)
	eventually(t, "the flood to drain", func() bool { s, _ := f.snapshot(); return count(s, "flood", "") == 100 })
	mu.Lock()
	defer mu.Unlock()
	if byProcess["0/flood"] <= 7 || byProcess["1/flood"] <= 7 {
		t.Fatalf("the flood's jobs by process: %v, want both processes to keep taking them", byProcess)
	}
}

// A paced band's lines start at its rate, and those over the rate wait in the stream,
// not in its slots: a tenant's small batch published beside another's large one, which
// has taken every start for a second, takes the band's next starts (at most one of the
// large batch's, fetched as the small one arrived, comes between), and the large one
// takes the starts after it.
func TestFairPacedBandSmallBatchTakesTheNextStarts(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	f := newFloor()
	publishLane(t, b, bus.BandBatch, "big", "batch_big", 200)
	spec := bus.JobLanes(bus.Timing{AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 1000}, 4)
	spec.Rates = map[string]float64{bus.BandBatch: 10} // a token every 100 ms, bursts of one
	start := time.Now()
	w, err := bus.ConsumeFair(context.Background(), b, spec, nil, f.handler, bus.ConsumeOptions{Concurrency: 16, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	eventually(t, "the big batch to start 10 lines", func() bool { s, _ := f.snapshot(); return count(s, "big", "") >= 10 })
	if d := time.Since(start); d < 850*time.Millisecond {
		t.Fatalf("10 lines started %s after the consumer: faster than 10 a second", d)
	}
	before, _ := f.snapshot()
	publishLane(t, b, bus.BandBatch, "ivy", "batch_small", 5)
	eventually(t, "ivy's 5 lines to start", func() bool { s, _ := f.snapshot(); return count(s, "ivy", "") == 5 })
	started, _ := f.snapshot()
	last := len(started) - 1
	for started[last][:4] != "ivy/" {
		last--
	}
	if n := count(started[len(before):last+1], "big", ""); n > 1 {
		t.Fatalf("%d of the big batch's lines started between ivy's publish and ivy's last line, want at most 1: %v", n, started[len(before):last+1])
	}
	eventually(t, "the big batch to go on", func() bool { s, _ := f.snapshot(); return count(s, "big", "") >= count(started, "big", "")+3 })
}
