package bus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
)

// Buses in namespaces "a" and "b" and one without share a server: a message
// published in "a" reaches only "a"'s consumer, with the un-namespaced subject; its
// dead letters, from a handler's verdict and from a worker that died on every
// delivery (the max-deliveries advisory, watched in every namespace), land in "a"'s
// DLQ naming the un-namespaced stream and consumer; nobody else's DLQ gets anything.
func TestNamespacesKeepMessagesAndDeadLettersApart(t *testing.T) {
	t.Parallel()
	url := bustest.Server(t)
	a := bustest.Connect(t, url, bus.WithNamespace("a"))
	b := bustest.Connect(t, url, bus.WithNamespace("b"))
	bare := bustest.Connect(t, url)
	if a.Name(bus.StreamJobs) != "a-JOBS" || a.Subject(bus.SubjectChatJob) != "a.fleet.jobs.v1.chat" || bare.Name(bus.StreamJobs) != "JOBS" {
		t.Fatalf("names: %s %s %s", a.Name(bus.StreamJobs), a.Subject(bus.SubjectChatJob), bare.Name(bus.StreamJobs))
	}
	for _, x := range []*bus.Bus{a, b, bare} {
		stop, err := x.WatchMaxDeliveries(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	dlA, dlB, dlBare := deadLetters(t, a), deadLetters(t, b), deadLetters(t, bare)

	// Other namespaces' consumers of the same consumer name see nothing.
	var others atomic.Int64
	for _, x := range []*bus.Bus{b, bare} {
		w, err := bus.Consume(context.Background(), x, fast(3), func(context.Context, *bus.Delivery[ping]) error {
			others.Add(1)
			return nil
		}, opts())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}

	// A handler in "a" refuses "poison" for good; "cursed"'s worker dies every time.
	spec := bus.ChatConsumer(bus.Timing{AckWait: 300 * time.Millisecond, MaxDeliver: 2, MaxAckPending: 10})
	subjects := make(chan string, 8)
	for attempt := 1; attempt <= 2; attempt++ {
		conn := bustest.Connect(t, url, bus.WithNamespace("a"))
		got := make(chan struct{})
		w, err := bus.Consume(context.Background(), conn, spec, func(ctx context.Context, d *bus.Delivery[ping]) error {
			subjects <- d.Subject
			if d.Msg.ID == "poison" {
				return bus.Permanent(errors.New("refused"))
			}
			close(got)
			<-ctx.Done()
			return ctx.Err()
		}, opts())
		if err != nil {
			t.Fatal(err)
		}
		if attempt == 1 {
			publish(t, a, ping{ID: "poison", N: 1})
			eventually(t, "poison dead-lettered", func() bool { return len(dlA()) == 1 })
			publish(t, a, ping{ID: "cursed", N: 2})
		}
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d never came", attempt)
		}
		conn.RawConn().Close() // dies holding the message
		w.Stop()
	}
	eventually(t, "both dead letters in a", func() bool { return len(dlA()) == 2 })
	for _, d := range dlA() {
		if d.Stream != bus.StreamJobs || d.Consumer != bus.ConsumerChat || d.Subject != bus.SubjectChatJob {
			t.Errorf("dead letter names %s/%s %s, want the un-namespaced JOBS/chatworker fleet.jobs.v1.chat", d.Stream, d.Consumer, d.Subject)
		}
	}
	if s := <-subjects; s != bus.SubjectChatJob {
		t.Errorf("delivery subject %q, want %q", s, bus.SubjectChatJob)
	}
	eventually(t, "a's work queue empty", func() bool { return streamMsgs(t, a, a.Name(bus.StreamJobs)) == 0 })
	if n := others.Load(); n != 0 {
		t.Errorf("consumers of other namespaces got %d of a's messages", n)
	}
	if len(dlB()) != 0 || len(dlBare()) != 0 || streamMsgs(t, b, b.Name(bus.StreamDLQ)) != 0 || streamMsgs(t, bare, bus.StreamDLQ) != 0 {
		t.Errorf("dead letters crossed namespaces: b %v, bare %v", dlB(), dlBare())
	}
}

// An invalid namespace is refused at connect.
func TestInvalidNamespaceRefused(t *testing.T) {
	t.Parallel()
	url := bustest.Server(t)
	for _, ns := range []string{"a.b", "a b", "a>", "x:y", "waytoolongwaytoolongwaytoolongwaytoolong"} {
		if _, err := bus.Connect(context.Background(), url, "t", quiet, bus.WithNamespace(ns)); err == nil {
			t.Errorf("namespace %q accepted", ns)
		}
	}
}

// EventJob reads the job of an event subject as a connection receives it, in its
// namespace or none; any other subject is no job's event.
func TestEventJob(t *testing.T) {
	t.Parallel()
	url := bustest.Server(t)
	a := bustest.Connect(t, url, bus.WithNamespace("a"))
	bare := bustest.Connect(t, url)
	ev := bus.Event{JobID: "job_1", Type: bus.EventModelCall}
	end := bus.Event{JobID: "job_2", Type: bus.EventCompleted}
	for _, tc := range []struct {
		b       *bus.Bus
		subject string
		want    string
	}{
		{bare, ev.Subject(), "job_1"},
		{bare, end.Subject(), "job_2"},
		{a, a.Subject(ev.Subject()), "job_1"},
		{a, a.Subject(end.Subject()), "job_2"},
		{bare, bus.SubjectStream("job_1"), ""},
		{bare, bus.SubjectChatJob, ""},
	} {
		if got := tc.b.EventJob(tc.subject); got != tc.want {
			t.Errorf("%s: EventJob(%q) = %q, want %q", tc.b.Namespace(), tc.subject, got, tc.want)
		}
	}
}
