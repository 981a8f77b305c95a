package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// keepingHook keeps every job it is told of.
type keepingHook struct {
	mu   sync.Mutex
	jobs []*state.Job
}

func (h *keepingHook) JobFinished(_ context.Context, job *state.Job) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jobs = append(h.jobs, job)
	return nil
}

func (h *keepingHook) told() []*state.Job {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*state.Job(nil), h.jobs...)
}

// callbackJob records a running job of tenant acme with a callback and a request.
func (r *rig) callbackJob(t *testing.T, request string) string {
	t.Helper()
	id := state.NewID("job_")
	now := time.Now().UTC()
	j := &state.Job{ID: id, Tenant: "acme", Kind: "chat", Model: "m", Created: now, Deadline: now.Add(time.Minute),
		Request:  json.RawMessage(`{"messages":[{"role":"user","content":"` + request + `"}]}`),
		Callback: json.RawMessage(`{"url":"https://example.com/hook?token=q","events":["completed","failed"]}`)}
	if err := r.store.Jobs.CreateJob(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	return id
}

// forget deletes a job's record, the hash that holds all of the job (its chain state
// too): what a Redis that restarted empty knows of it.
func (r *rig) forget(t *testing.T, id string) {
	t.Helper()
	if n, err := r.rdb.Del(t.Context(), r.store.K.Job(id)).Result(); err != nil || n != 1 {
		t.Fatalf("forgetting the job: %d %v", n, err)
	}
}

// The terminal event of a job with a callback carries a copy of the ended job (less
// its request); when Redis no longer knows the job, the finisher counts the orphan and
// runs its hooks from that copy, writing nothing back for it. A job without a callback
// carries no copy: its hooks do not run.
func TestFinisherRunsHooksOfAJobRedisLostFromItsEvent(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	hook := &keepingHook{}
	f := jobs.NewFinisher(r.store.Jobs, r.ender, r.m, nil, hook)

	id := r.callbackJob(t, "the request stays home")
	if err := r.ender.End(ctx, id, jobs.Ending{Status: state.Completed, Hop: 1, Response: json.RawMessage(`{"text":"the answer"}`),
		Usage: json.RawMessage(`{"searches":1}`), Trace: json.RawMessage(`[{"q":"nats"}]`)}); err != nil {
		t.Fatal(err)
	}
	evs := r.terminalEvents(t, id)
	if len(evs) != 1 || len(evs[0].Job) == 0 {
		t.Fatalf("terminal events = %+v, want one carrying the job", evs)
	}
	if strings.Contains(string(evs[0].Job), "the request stays home") {
		t.Fatalf("the event's copy holds the request: %s", evs[0].Job)
	}
	r.forget(t, id)
	if err := f.Handle(ctx, &bus.Delivery[bus.Event]{Msg: evs[0], Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	told := hook.told()
	if len(told) != 1 {
		t.Fatalf("hook told of %d jobs, want 1", len(told))
	}
	j := told[0]
	if j.ID != id || j.Tenant != "acme" || j.Status != state.Completed || j.Finished.IsZero() ||
		string(j.Response) != `{"text":"the answer"}` || string(j.Usage) != `{"searches":1}` || string(j.Trace) != `[{"q":"nats"}]` ||
		!strings.Contains(string(j.Callback), "https://example.com/hook") || j.Request != nil {
		t.Fatalf("hook told of %+v", j)
	}
	if got := testutil.ToFloat64(r.m.Orphans.WithLabelValues(bus.ConsumerFinisher)); got != 1 {
		t.Fatalf("orphans = %v, want 1", got)
	}
	if n, _ := r.rdb.Exists(ctx, r.store.K.Job(id)).Result(); n != 0 {
		t.Fatal("the finisher wrote a record for a job Redis does not know")
	}

	plain := r.job(t)
	if err := r.ender.End(ctx, plain, jobs.Ending{Status: state.Completed, Response: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	evs = r.terminalEvents(t, plain)
	if len(evs) != 1 || evs[0].Job != nil {
		t.Fatalf("terminal events = %+v, want one without a copy", evs)
	}
	r.forget(t, plain)
	if err := f.Handle(ctx, &bus.Delivery[bus.Event]{Msg: evs[0], Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if n := len(hook.told()); n != 1 {
		t.Fatalf("hook told of %d jobs, want still 1", n)
	}
}

// The copy is bounded: a job whose copy would exceed jobs.MaxEventJob ends with a
// terminal event that carries none; a failed job's copy carries its error.
func TestTerminalEventCopyIsBounded(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	big := r.callbackJob(t, "big")
	answer := json.RawMessage(`{"text":"` + strings.Repeat("a", jobs.MaxEventJob) + `"}`)
	if err := r.ender.End(ctx, big, jobs.Ending{Status: state.Completed, Response: answer}); err != nil {
		t.Fatal(err)
	}
	if evs := r.terminalEvents(t, big); len(evs) != 1 || evs[0].Job != nil {
		t.Fatalf("terminal events of the big job carry %d bytes of copy, want none", len(evs[0].Job))
	}
	failed := r.callbackJob(t, "failed")
	je := &state.JobError{Status: 502, Type: "upstream_error", Message: "it broke"}
	if err := r.ender.End(ctx, failed, jobs.Ending{Status: state.Failed, Error: je}); err != nil {
		t.Fatal(err)
	}
	evs := r.terminalEvents(t, failed)
	var j state.Job
	if len(evs) != 1 || json.Unmarshal(evs[0].Job, &j) != nil || j.Error == nil || *j.Error != *je || j.Status != state.Failed {
		t.Fatalf("terminal events = %+v, want one with the failed job", evs)
	}
}
