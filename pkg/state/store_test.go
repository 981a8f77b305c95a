package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/state"
)

func newStore(t *testing.T) *state.Store {
	rdb, prefix := testenv.Redis(t)
	return state.New(rdb, prefix, time.Hour)
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	j := &state.Job{ID: "j1", Kind: "chat", Model: "m", Request: json.RawMessage(`{"model":"m"}`), Deadline: time.Now().Add(time.Minute)}
	if err := s.Jobs.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := s.Jobs.CreateJob(ctx, j); !errors.Is(err, state.ErrExists) {
		t.Fatalf("second create = %v, want ErrExists", err)
	}
	got, err := s.Jobs.GetJob(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != state.Queued || string(got.Request) != `{"model":"m"}` || got.Deadline.IsZero() {
		t.Fatalf("job = %+v", got)
	}
	if ok, _ := s.Jobs.Update(ctx, "j1", state.Running); !ok {
		t.Fatal("queued → running refused")
	}
	if ok, _ := s.Jobs.Update(ctx, "j1", state.Completed, "response", json.RawMessage(`{"ok":true}`)); !ok {
		t.Fatal("running → completed refused")
	}
	// A terminal job never moves again: a late failure or cancel is a no-op.
	if ok, _ := s.Jobs.Update(ctx, "j1", state.Failed, "error", &state.JobError{Type: "x", Message: "late"}); ok {
		t.Fatal("completed → failed was allowed")
	}
	got, _ = s.Jobs.GetJob(ctx, "j1")
	if got.Status != state.Completed || string(got.Response) != `{"ok":true}` || got.Error != nil || got.Finished.IsZero() {
		t.Fatalf("job after end = %+v", got)
	}
	overdue, _ := s.Jobs.Overdue(ctx, time.Now().Add(time.Hour), 10)
	for _, id := range overdue {
		if id == "j1" {
			t.Fatal("a finished job is still in the deadline set")
		}
	}
	if _, err := s.Jobs.GetJob(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("missing job = %v", err)
	}
}

// (Racing SaveTurns agreeing on one answer is the chain suite's TurnRaceAgrees, in
// chain_conformance_test.go.)

func TestRecordResultCountsOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: "j", Kind: "chat", Request: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chains.SaveCalls(ctx, "j", 1, []byte(`["a","b"]`), 2, 2); err != nil {
		t.Fatal(err)
	}
	// Dispatch replayed: counters unchanged.
	if _, err := s.Chains.SaveCalls(ctx, "j", 1, []byte(`["a","b"]`), 2, 2); err != nil {
		t.Fatal(err)
	}
	have, want, _ := s.Chains.RecordResult(ctx, "j", 1, "a", []byte(`"ra"`))
	if have != 1 || want != 2 {
		t.Fatalf("after a: %d/%d", have, want)
	}
	have, _, _ = s.Chains.RecordResult(ctx, "j", 1, "a", []byte(`"ra-again"`))
	if have != 1 {
		t.Fatalf("duplicate result counted: %d", have)
	}
	have, want, _ = s.Chains.RecordResult(ctx, "j", 1, "b", []byte(`"rb"`))
	if have != 2 || want != 2 {
		t.Fatalf("after b: %d/%d", have, want)
	}
	st, err := s.Chains.LoadStep(ctx, "j", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := st.Chain
	hp := c.Hops[1]
	if string(hp.Results["a"]) != `"ra"` || string(hp.Calls) != `["a","b"]` || hp.Expected != 2 || c.Searches != 2 {
		t.Fatalf("chain = %+v hop = %+v", c, hp)
	}
}

func TestLease(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	key := s.K.Lease("j", 0)
	if ok, _, _ := s.Leases.Lease(ctx, key, "w1", time.Second); !ok {
		t.Fatal("w1 did not get a free lease")
	}
	ok, left, _ := s.Leases.Lease(ctx, key, "w2", time.Second)
	if ok || left <= 0 || left > time.Second {
		t.Fatalf("w2 got a held lease: ok=%v left=%s", ok, left)
	}
	if ok, _, _ := s.Leases.Lease(ctx, key, "w1", time.Second); !ok {
		t.Fatal("holder could not renew")
	}
	s.Leases.Release(ctx, key, "w2") // not the holder: no effect
	if ok, _, _ := s.Leases.Lease(ctx, key, "w2", time.Second); ok {
		t.Fatal("release by a non-holder freed the lease")
	}
	s.Leases.Release(ctx, key, "w1")
	if ok, _, _ := s.Leases.Lease(ctx, key, "w2", time.Second); !ok {
		t.Fatal("w2 could not take a released lease")
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	// 2 per second, burst 3: three pass at once, the fourth waits ~500ms.
	for i := range 3 {
		if d, err := s.Searches.Allow(ctx, "brave", 2, 3); err != nil || d != 0 {
			t.Fatalf("request %d: wait %s err %v", i+1, d, err)
		}
	}
	d, err := s.Searches.Allow(ctx, "brave", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 || d > 600*time.Millisecond {
		t.Fatalf("fourth request wait = %s, want (0, 600ms]", d)
	}
	if d, _ := s.Searches.Allow(ctx, "other-engine", 2, 3); d != 0 {
		t.Fatal("limits leak between engines")
	}
}

// A held lease outlives its TTL while its holder lives, and lapses within the TTL once
// the holder is gone.
func TestHoldRenewsUntilReleased(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	key := s.K.Lease("j", 3)
	// A TTL a loaded machine's scheduler cannot outlast between renewals (every third of
	// it); the sleep is more than twice the TTL.
	const ttl = time.Second
	release, _, err := s.Leases.Hold(ctx, key, "w1", ttl)
	if err != nil || release == nil {
		t.Fatalf("Hold: %v", err)
	}
	time.Sleep(2*ttl + 300*time.Millisecond)
	if ok, left, _ := s.Leases.Lease(ctx, key, "w2", time.Second); ok || left <= 0 || left > ttl {
		t.Fatalf("the lease lapsed under a live holder (ok=%v left=%s)", ok, left)
	}
	if r2, left, _ := s.Leases.Hold(ctx, key, "w2", time.Second); r2 != nil || left <= 0 {
		t.Fatal("a second holder got a held lease")
	}
	release(true)
	if ok, _, _ := s.Leases.Lease(ctx, key, "w2", time.Second); !ok {
		t.Fatal("released lease not free")
	}
}

// The result that completes a hop claims the next hop's lease for its worker, in the
// same round trip that records it and reads the chain back; earlier results do not.
func TestRecordAndLoadClaimsNextHop(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: "j", Kind: "chat", Request: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Chains.SaveCalls(ctx, "j", 0, []byte(`[]`), 2, 2); err != nil || st != state.Queued {
		t.Fatalf("SaveCalls status %q err %v", st, err)
	}
	st, err := s.Chains.RecordAndLoad(ctx, "j", 0, "a", []byte(`{"a":1}`), "w1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Have != 1 || st.Want != 2 || st.Claimed || !st.Chain.Sticky {
		t.Fatalf("after a: have %d want %d claimed %v sticky %v", st.Have, st.Want, st.Claimed, st.Chain.Sticky)
	}
	st, err = s.Chains.RecordAndLoad(ctx, "j", 0, "b", []byte(`{"b":1}`), "w2", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Have != 2 || !st.Claimed || st.Job.ID != "j" || len(st.Chain.Hops[0].Results) != 2 {
		t.Fatalf("after b: %+v", st)
	}
	// A replayed first result keeps its place and claims nothing; a replayed
	// completing one finds the next hop taken by w2.
	st, _ = s.Chains.RecordAndLoad(ctx, "j", 0, "a", []byte(`{"a":2}`), "w1", time.Second)
	if st.Have != 1 || st.Claimed || st.Left != 0 || string(st.Chain.Hops[0].Results["a"]) != `{"a":1}` {
		t.Fatalf("replay of a: have %d claimed %v left %s result %s", st.Have, st.Claimed, st.Left, st.Chain.Hops[0].Results["a"])
	}
	st, _ = s.Chains.RecordAndLoad(ctx, "j", 0, "b", []byte(`{"b":2}`), "w1", time.Second)
	if st.Have != 2 || st.Claimed || st.Left <= 0 {
		t.Fatalf("replay of b: have %d claimed %v left %s", st.Have, st.Claimed, st.Left)
	}
	// SaveTurn stores once, and the first hop's marks the job running.
	if v, _ := s.Chains.SaveTurn(ctx, "j", 0, []byte(`{"t":1}`), true, true); string(v) != `{"t":1}` {
		t.Fatalf("turn %s", v)
	}
	if v, _ := s.Chains.SaveTurn(ctx, "j", 0, []byte(`{"t":2}`), true, true); string(v) != `{"t":1}` {
		t.Fatalf("second turn overwrote the first: %s", v)
	}
	if st, _ := s.Jobs.JobStatus(ctx, "j"); st != state.Running {
		t.Fatalf("status %s after the first turn", st)
	}
}

// A webhook status moves only from the statuses allowed, never on an expired job, and
// a delivered status is not overwritten by a later failure.
func TestSetWebhookStatus(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if now, changed, _ := s.Webhooks.SetWebhookStatus(ctx, "gone", "pending"); now != "" || changed {
		t.Fatalf("expired job: %q %v", now, changed)
	}
	if m, _ := s.Jobs.JobFields(ctx, "gone"); len(m) != 0 {
		t.Fatalf("an expired job record was recreated: %v", m)
	}
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: "j", Kind: "chat", Request: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if now, changed, _ := s.Webhooks.SetWebhookStatus(ctx, "j", "pending", "", "pending"); now != "pending" || !changed {
		t.Fatalf("to pending: %q %v", now, changed)
	}
	if now, changed, _ := s.Webhooks.SetWebhookStatus(ctx, "j", "delivered", "pending"); now != "delivered" || !changed {
		t.Fatalf("to delivered: %q %v", now, changed)
	}
	if now, changed, _ := s.Webhooks.SetWebhookStatus(ctx, "j", "failed", "pending"); now != "delivered" || changed {
		t.Fatalf("failed overwrote delivered: %q %v", now, changed)
	}
	if j, _ := s.Jobs.GetJob(ctx, "j"); j.WebhookStatus != "delivered" {
		t.Fatalf("record says %q", j.WebhookStatus)
	}
}

// A live holder keeps its lease past the lease's TTL (renewed every TTL/3); once it
// stops, the lease lapses within the TTL, or at once when dropped, and no renewal under
// way can write it back.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	key := s.K.Lease("job_keep", 0)
	ok, _, err := s.Leases.Lease(ctx, key, "a", ttl)
	if err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	stop := s.Leases.KeepAlive(key, "a", ttl)
	time.Sleep(3 * ttl) // three TTLs: only renewals keep it
	if ok, _, _ := s.Leases.Lease(ctx, key, "b", ttl); ok {
		t.Fatal("another owner took a lease its live holder keeps")
	}
	stop(false)
	deadline := time.Now().Add(5 * ttl)
	for {
		if ok, _, _ := s.Leases.Lease(ctx, key, "b", ttl); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease did not lapse after its holder stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}

	key2 := s.K.Lease("job_keep", 1)
	s.Leases.Lease(ctx, key2, "a", ttl)
	stop = s.Leases.KeepAlive(key2, "a", ttl)
	time.Sleep(ttl / 2)
	stop(true)
	if ok, _, _ := s.Leases.Lease(ctx, key2, "b", ttl); !ok {
		t.Fatal("a dropped lease is still held")
	}
}

// BenchmarkKeepAlive is a lease kept for one model call or search and stopped before
// its first renewal, as most are: what the keeping costs besides the renewals.
func BenchmarkKeepAlive(b *testing.B) {
	s := state.New(nil, "bench:", time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		s.Leases.KeepAlive("lease", "w", time.Hour)(false)
	}
}

// A job whose id was just drawn (FreshID) is written with its record's TTL, its
// deadline and its tenant's index entry, as any other; on one Redis, with an archive
// and a deadline, it is written without looking for an earlier record (no ErrExists
// on a repeat: no script ran). A job whose id may repeat (no FreshID), one without a
// deadline, and one in a store without an archive are checked: ErrExists.
func TestCreateFreshJob(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	s := state.New(rdb, prefix, time.Hour, state.WithArchive(&memArchive{m: map[string][]byte{}}))
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	j := &state.Job{ID: state.NewID("job_"), FreshID: true, Tenant: "t0", Kind: "chat", Model: "m", Request: json.RawMessage(`{"model":"m"}`),
		Question: "what is new?", Deadline: deadline}
	if err := s.Jobs.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.PTTL(ctx, s.K.Job(j.ID)).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Errorf("the record's TTL is %v (%v), want at most an hour", ttl, err)
	}
	if score, err := rdb.ZScore(ctx, s.K.Deadlines(), j.ID).Result(); err != nil || int64(score) != deadline.UnixMilli() {
		t.Errorf("deadline entry %v (%v), want %d", score, err, deadline.UnixMilli())
	}
	if score, err := rdb.ZScore(ctx, s.K.TenantJobs("t0"), j.ID).Result(); err != nil || int64(score) != j.Created.UnixMilli() {
		t.Errorf("index entry %v (%v), want %d", score, err, j.Created.UnixMilli())
	}
	got, err := s.Jobs.GetJob(ctx, j.ID)
	if err != nil || got.Status != state.Queued || got.Tenant != "t0" || got.Question != "what is new?" ||
		string(got.Request) != `{"model":"m"}` || !got.Deadline.Equal(deadline) {
		t.Fatalf("job = %+v, %v", got, err)
	}
	if err := s.Jobs.CreateJob(ctx, j); err != nil && !errors.Is(err, state.ErrExists) {
		t.Fatal(err)
	} else if _, single := rdb.(*redis.Client); single && err != nil {
		t.Errorf("a fresh job on one Redis was looked for: %v", err)
	}

	old := state.New(rdb, prefix, time.Hour) // no archive
	for _, c := range []struct {
		what string
		s    *state.Store
		j    state.Job
	}{
		{"an id that may repeat", s, state.Job{ID: "job_keyed", Kind: "chat", Deadline: deadline}},
		{"no deadline", s, state.Job{ID: "job_nodeadline", FreshID: true, Kind: "chat"}},
		{"no archive", old, state.Job{ID: "job_noarchive", FreshID: true, Kind: "chat", Deadline: deadline}},
	} {
		first, again := c.j, c.j
		if err := c.s.Jobs.CreateJob(ctx, &first); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if err := c.s.Jobs.CreateJob(ctx, &again); !errors.Is(err, state.ErrExists) {
			t.Errorf("%s: second create = %v, want ErrExists", c.what, err)
		}
		if ttl, _ := rdb.PTTL(ctx, c.s.K.Job(c.j.ID)).Result(); ttl <= 0 {
			t.Errorf("%s: the record's TTL is %v", c.what, ttl)
		}
	}
}

// A fresh job's write that stopped after its record and before its TTL (the ingress
// died part way) leaks nothing: its deadline, written first, is due, the reaper ends
// the job (as jobs.Reaper does: Finish), and the finisher's archiving (ReadEnded,
// ArchiveEnded) writes the record back with the TTL left of its retention.
func TestFreshJobWithoutItsTTLGetsOneWhenArchived(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	s := state.New(rdb, prefix, time.Hour, state.WithArchive(&memArchive{m: map[string][]byte{}}))
	ctx := context.Background()
	j := &state.Job{ID: state.NewID("job_"), FreshID: true, Tenant: "t0", Kind: "chat", Model: "m",
		Created: time.Now().Add(-2 * time.Minute), Deadline: time.Now().Add(-time.Minute)}
	if err := s.Jobs.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Persist(ctx, s.K.Job(j.ID)).Err(); err != nil { // the PEXPIRE that did not land
		t.Fatal(err)
	}
	if ids, err := s.Jobs.Overdue(ctx, time.Now(), 10); err != nil || !slices.Contains(ids, j.ID) {
		t.Fatalf("overdue %v, %v; want the job", ids, err)
	}
	if st, err := s.Jobs.JobStatus(ctx, j.ID); err != nil || st != state.Queued {
		t.Fatalf("status %q, %v", st, err)
	}
	if ok, err := s.Jobs.Finish(ctx, j.ID, state.Failed, "error", &state.JobError{Status: 504, Type: "timeout", Message: "deadline"}); err != nil || !ok {
		t.Fatalf("the reaper's ending = %v, %v", ok, err)
	}
	ended, err := s.Jobs.ReadEnded(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Jobs.ArchiveEnded(ctx, ended); err != nil {
		t.Fatal(err)
	}
	ttl, err := rdb.PTTL(ctx, s.K.Job(j.ID)).Result()
	if err != nil || ttl <= 0 || ttl > time.Hour-2*time.Minute+time.Second {
		t.Errorf("the archived record's TTL is %v (%v), want what is left of its hour", ttl, err)
	}
	if n, _ := rdb.ZCard(ctx, s.K.Deadlines()).Result(); n != 0 {
		t.Errorf("%d deadlines left", n)
	}
}
