package jobs_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The write that ends a job naming an ingress hands the ended job to that ingress
// alone, before the job's terminal event, on one connection: it arrives first, and
// decodes to what Redis then holds. A later ending (it moved nothing) hands nothing
// over, nor does the ending of a job naming no ingress.
func TestEndHandsTheEndedJobToItsIngressFirst(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	// What the ingress's connection receives, in order: its handed jobs and every
	// job's events, on one channel.
	got := make(chan *nats.Msg, 64)
	for _, subj := range []string{bus.SubjectEndedTo("ingressa"), bus.SubjectEventsAll, bus.SubjectEndedTo("ingressb")} {
		sub, err := r.bus.RawConn().ChanSubscribe(r.bus.Subject(subj), got)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Unsubscribe() })
	}
	if err := r.bus.RawConn().Flush(); err != nil {
		t.Fatal(err)
	}
	create := func(ingress string) string {
		id := state.NewID("job_")
		now := time.Now().UTC()
		if err := r.store.Jobs.CreateJob(ctx, &state.Job{ID: id, Kind: "chat", Created: now, Deadline: now.Add(time.Minute),
			Request: json.RawMessage(`{"q":1}`), Ingress: ingress}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	next := func() *nats.Msg {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("nothing arrived")
			return nil
		}
	}
	// skipQueued returns the next message that is not a queued event.
	skipQueued := func() *nats.Msg {
		for {
			m := next()
			if ev, _, err := bus.Decode[bus.Event](m.Data); err != nil || ev.Type != bus.EventQueued {
				return m
			}
		}
	}

	id := create("ingressa")
	if err := r.ender.End(ctx, id, jobs.Ending{Status: state.Completed, Response: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	m := skipQueued()
	if m.Subject != r.bus.Subject(bus.SubjectEnded("ingressa", id)) || r.bus.EndedJob(m.Subject) != id {
		t.Fatalf("first came %s, want the handed job", m.Subject)
	}
	handed, err := state.EndedJob(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.store.Jobs.GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(handed, want) {
		t.Fatalf("handed %+v\nRedis holds %+v", handed, want)
	}
	if m := next(); m.Subject != r.bus.Subject(bus.SubjectJobEnd(id)) {
		t.Fatalf("then came %s, want the terminal event", m.Subject)
	}

	// A second ending moves nothing: its event goes out again, no job is handed over.
	if err := r.ender.End(ctx, id, jobs.Ending{Status: state.Cancelled}); err != nil {
		t.Fatal(err)
	}
	if m := next(); m.Subject != r.bus.Subject(bus.SubjectJobEnd(id)) {
		t.Fatalf("a second ending sent %s", m.Subject)
	}
	// A job naming no ingress is not handed over.
	other := create("")
	if err := r.ender.End(ctx, other, jobs.Ending{Status: state.Failed, Error: jobs.DeadlineExceeded()}); err != nil {
		t.Fatal(err)
	}
	if m := skipQueued(); m.Subject != r.bus.Subject(bus.SubjectJobEnd(other)) {
		t.Fatalf("a job naming no ingress sent %s", m.Subject)
	}
	select {
	case m := <-got:
		t.Fatalf("then %s", m.Subject)
	case <-time.After(100 * time.Millisecond):
	}
}

// SendEnded sends nothing the connection could not publish, nor to a subject that is
// not one ingress's.
func TestSendEndedRefuses(t *testing.T) {
	r := newRig(t)
	if sent, err := r.bus.SendEnded("i", "job_1", make([]byte, r.bus.RawConn().MaxPayload()+1)); sent || err != nil {
		t.Fatalf("an oversized record: sent %v, %v", sent, err)
	}
	for _, bad := range [][2]string{{"*", "job_1"}, {"i.j", "job_1"}, {"i", ">"}, {"", "job_1"}} {
		if sent, err := r.bus.SendEnded(bad[0], bad[1], []byte{1}); sent || err == nil {
			t.Errorf("SendEnded(%q, %q) = %v, %v", bad[0], bad[1], sent, err)
		}
	}
}
