package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

type rig struct {
	bus   *bus.Bus
	store *state.Store
	ender *jobs.Ender
	m     *metrics.Metrics
	// lose rewrites a job's Redis status behind the fleet's back: what a Redis restart
	// without fsync does to an acknowledged write.
	lose func(id string, st state.Status)
	rdb  redis.UniversalClient
}

func newRig(t *testing.T) *rig {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	st := state.New(rdb, prefix, time.Hour)
	m := metrics.New()
	return &rig{bus: b, store: st, m: m, ender: jobs.NewEnder(st.Jobs, b, m, nil), rdb: rdb,
		lose: func(id string, s state.Status) {
			if err := rdb.HSet(context.Background(), st.K.Job(id), "status", string(s)).Err(); err != nil {
				t.Fatal(err)
			}
		}}
}

func (r *rig) job(t *testing.T) string {
	t.Helper()
	id := state.NewID("job_")
	now := time.Now().UTC()
	if err := r.store.Jobs.CreateJob(t.Context(), &state.Job{ID: id, Kind: "chat", Created: now, Deadline: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	return id
}

// terminalEvents counts the job's terminal events in the stream.
func (r *rig) terminalEvents(t *testing.T, id string) []bus.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := r.bus.RawJetStream().OrderedConsumer(ctx, bus.StreamEvents, jetstreamFilter(id))
	if err != nil {
		t.Fatal(err)
	}
	var out []bus.Event
	for {
		batch, err := c.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev, _, err := bus.Decode[bus.Event](m.Data())
			if err == nil && ev.Type.Terminal() {
				out = append(out, ev)
			}
		}
		if n == 0 {
			return out
		}
	}
}

func TestEndFirstEndingStands(t *testing.T) {
	r := newRig(t)
	id := r.job(t)
	resp := json.RawMessage(`{"answer":1}`)
	if err := r.ender.End(t.Context(), id, jobs.Ending{Status: state.Completed, Response: resp}); err != nil {
		t.Fatal(err)
	}
	// A cancel racing the answer, a redelivered failure: neither changes the outcome.
	if err := r.ender.End(t.Context(), id, jobs.Ending{Status: state.Cancelled}); err != nil {
		t.Fatal(err)
	}
	if err := r.ender.End(t.Context(), id, jobs.Ending{Status: state.Failed, Error: jobs.DeadlineExceeded()}); err != nil {
		t.Fatal(err)
	}
	job, err := r.store.Jobs.GetJob(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != state.Completed || string(job.Response) != string(resp) || job.Error != nil {
		t.Fatalf("job = %s %s %v, want completed with its answer", job.Status, job.Response, job.Error)
	}
	evs := r.terminalEvents(t, id)
	if len(evs) != 1 || evs[0].Type != bus.EventCompleted {
		t.Fatalf("terminal events = %+v, want one completed", evs)
	}
	if got := testutil.ToFloat64(r.m.Jobs.WithLabelValues("completed")); got != 1 {
		t.Fatalf("fleet_jobs_total{completed} = %v, want 1", got)
	}
}

// Defect: Redis lost the write of a job's completed status after the fleet had
// published "completed"; the reaper then failed the job and a second outcome went out.
// Within the duplicate window the stream refuses the second terminal event and End
// puts Redis back.
func TestEndAfterRedisLostTheEndingKeepsTheRecordedOne(t *testing.T) {
	r := newRig(t)
	id := r.job(t)
	if err := r.ender.End(t.Context(), id, jobs.Ending{Status: state.Completed, Response: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	r.lose(id, state.Running)
	if err := r.ender.End(t.Context(), id, jobs.Ending{Status: state.Failed, Error: jobs.DeadlineExceeded()}); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.store.Jobs.JobStatus(t.Context(), id); st != state.Completed {
		t.Fatalf("status = %s, want completed (the stream's record)", st)
	}
	if evs := r.terminalEvents(t, id); len(evs) != 1 || evs[0].Type != bus.EventCompleted {
		t.Fatalf("terminal events = %+v, want only completed", evs)
	}
	if got := testutil.ToFloat64(r.m.Reconciled); got != 1 {
		t.Fatalf("fleet_jobs_reconciled_total = %v, want 1", got)
	}
}

// Past the duplicate window only a lookup tells: the reaper asks the stream before it
// ends an overdue job.
func TestReaperReconcilesFromTheStreamInsteadOfFailing(t *testing.T) {
	r := newRig(t)
	id := r.job(t)
	je := jobs.UpstreamFailed("the provider failed")
	if err := r.ender.End(t.Context(), id, jobs.Ending{Status: state.Failed, Error: je}); err != nil {
		t.Fatal(err)
	}
	r.lose(id, state.Running)
	reArm(t, r, id)
	reaper := jobs.NewReaper(r.store.Jobs, r.ender, "test", nil)
	reaper.Sweep(t.Context(), time.Now().Add(2*time.Minute))
	job, err := r.store.Jobs.GetJob(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != state.Failed || job.Error == nil || job.Error.Type != "upstream_error" || job.Error.Status != je.Status {
		t.Fatalf("job = %s %+v, want failed with the recorded upstream_error", job.Status, job.Error)
	}
	if evs := r.terminalEvents(t, id); len(evs) != 1 {
		t.Fatalf("terminal events = %+v, want one", evs)
	}
}

// A crash between the two writes of an ending (Redis says ended, no event) is repaired
// by the reaper: the job's deadline stays set until its event is out.
func TestReaperPublishesAnEndingThatCrashedBeforeItsEvent(t *testing.T) {
	r := newRig(t)
	id := r.job(t)
	if _, err := r.store.Jobs.Finish(t.Context(), id, state.Completed, false, "response", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	reArm(t, r, id)
	if evs := r.terminalEvents(t, id); len(evs) != 0 {
		t.Fatalf("terminal events before the sweep = %+v", evs)
	}
	jobs.NewReaper(r.store.Jobs, r.ender, "test", nil).Sweep(t.Context(), time.Now().Add(2*time.Minute))
	if evs := r.terminalEvents(t, id); len(evs) != 1 || evs[0].Type != bus.EventCompleted {
		t.Fatalf("terminal events = %+v, want one completed", evs)
	}
	if ids, _ := r.store.Jobs.Overdue(t.Context(), time.Now().Add(2*time.Minute), 10); len(ids) != 0 {
		t.Fatalf("deadlines left = %v", ids)
	}
}

func TestReaperFailsAJobThatNeverEnded(t *testing.T) {
	r := newRig(t)
	id := r.job(t)
	jobs.NewReaper(r.store.Jobs, r.ender, "test", nil).Sweep(t.Context(), time.Now().Add(2*time.Minute))
	job, _ := r.store.Jobs.GetJob(t.Context(), id)
	if job.Status != state.Failed || job.Error == nil || job.Error.Code != "job_deadline_exceeded" {
		t.Fatalf("job = %s %+v, want failed job_deadline_exceeded", job.Status, job.Error)
	}
	if evs := r.terminalEvents(t, id); len(evs) != 1 || evs[0].Type != bus.EventFailed {
		t.Fatalf("terminal events = %+v", evs)
	}
}

type recordingHook struct {
	mu   sync.Mutex
	seen map[string]state.Status
}

func (h *recordingHook) JobFinished(_ context.Context, job *state.Job) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[job.ID] = job.Status
	return nil
}

// The finisher runs the hooks from the terminal event, with Redis made to agree with
// the event first; a terminal event of a job Redis does not know is counted.
func TestFinisherRunsHooksForTheRecordedOutcome(t *testing.T) {
	r := newRig(t)
	hook := &recordingHook{seen: map[string]state.Status{}}
	f := jobs.NewFinisher(r.store.Jobs, r.ender, r.m, nil, hook)
	id := r.job(t)
	if err := r.ender.End(t.Context(), id, jobs.Ending{Status: state.Cancelled}); err != nil {
		t.Fatal(err)
	}
	r.lose(id, state.Running)
	if err := f.Handle(t.Context(), &bus.Delivery[bus.Event]{Msg: bus.Event{JobID: id, Type: bus.EventCancelled}}); err != nil {
		t.Fatal(err)
	}
	if hook.seen[id] != state.Cancelled {
		t.Fatalf("hook saw %q, want cancelled", hook.seen[id])
	}
	if st, _ := r.store.Jobs.JobStatus(t.Context(), id); st != state.Cancelled {
		t.Fatalf("status = %s, want cancelled", st)
	}
	if err := f.Handle(t.Context(), &bus.Delivery[bus.Event]{Msg: bus.Event{JobID: "job_gone", Type: bus.EventCompleted}}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(r.m.Orphans.WithLabelValues(bus.ConsumerFinisher)); got != 1 {
		t.Fatalf("orphans = %v, want 1", got)
	}
	if _, ok := hook.seen["job_gone"]; ok {
		t.Fatal("a hook ran for a job Redis does not know")
	}
}

func jetstreamFilter(id string) jetstream.OrderedConsumerConfig {
	return jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.SubjectJobEvents(id)}}
}

// reArm puts a job back in the reaper's deadline set, due now: as if its ending had
// not been published, or Redis had lost that too.
func reArm(t *testing.T, r *rig, id string) {
	t.Helper()
	if err := r.rdb.ZAdd(context.Background(), r.store.K.Deadlines(), redis.Z{Score: float64(time.Now().UnixMilli()), Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
}

// failingSettle is a store that cannot put a job's status back (Redis refuses it).
type failingSettle struct{ *state.Jobs }

func (failingSettle) Settle(context.Context, string, state.Status, *state.JobError) error {
	return errors.New("settle refused")
}

// End leaves a job's deadline to the finisher, which forgets it in the round trip that
// reads the job. A finisher that finds Redis lost the ending and cannot put it back
// leaves the deadline set, so the reaper repairs the job.
func TestFinisherForgetsTheDeadline(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	overdue := func() []string {
		t.Helper()
		ids, err := r.store.Jobs.Overdue(ctx, time.Now().Add(2*time.Minute), 10)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	f := jobs.NewFinisher(r.store.Jobs, r.ender, r.m, nil)
	id := r.job(t)
	if err := r.ender.End(ctx, id, jobs.Ending{Status: state.Completed, Response: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if ids := overdue(); !slices.Equal(ids, []string{id}) {
		t.Fatalf("deadlines after End = %v, want the job's, left to the finisher", ids)
	}
	if err := f.Handle(ctx, &bus.Delivery[bus.Event]{Msg: bus.Event{JobID: id, Type: bus.EventCompleted}}); err != nil {
		t.Fatal(err)
	}
	if ids := overdue(); len(ids) != 0 {
		t.Fatalf("deadlines after the finisher = %v", ids)
	}

	lost := r.job(t)
	if err := r.ender.End(ctx, lost, jobs.Ending{Status: state.Cancelled}); err != nil {
		t.Fatal(err)
	}
	r.lose(lost, state.Running)
	broken := failingSettle{r.store.Jobs}
	fb := jobs.NewFinisher(broken, jobs.NewEnder(broken, r.bus, r.m, nil), r.m, nil)
	if err := fb.Handle(ctx, &bus.Delivery[bus.Event]{Msg: bus.Event{JobID: lost, Type: bus.EventCancelled}}); err == nil {
		t.Fatal("a finisher that could not put the ending back succeeded")
	}
	if ids := overdue(); !slices.Equal(ids, []string{lost}) {
		t.Fatalf("deadlines after a failed repair = %v, want the job's, for the reaper", ids)
	}
	jobs.NewReaper(r.store.Jobs, r.ender, "test", nil).Sweep(ctx, time.Now().Add(2*time.Minute))
	if st, _ := r.store.Jobs.JobStatus(ctx, lost); st != state.Cancelled {
		t.Fatalf("status after the reaper = %s, want cancelled", st)
	}
	if ids := overdue(); len(ids) != 0 {
		t.Fatalf("deadlines after the reaper = %v", ids)
	}
}
