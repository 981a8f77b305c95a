package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
)

// The bus conformance suite: each test starts its own embedded JetStream server and
// checks one delivery semantic end to end.

type ping struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

func (ping) Kind() string    { return "test.ping.v1" }
func (p ping) MsgID() string { return p.ID }

// fast is a consumer spec with short timings so redeliveries happen within a test.
func fast(maxDeliver int) bus.ConsumerSpec {
	return bus.ChatConsumer(bus.Timing{AckWait: 700 * time.Millisecond, MaxDeliver: maxDeliver, MaxAckPending: 100})
}

var quiet = slog.New(slog.DiscardHandler)

func opts() bus.ConsumeOptions { return bus.ConsumeOptions{Concurrency: 4, Log: quiet} }

func publish(t *testing.T, b *bus.Bus, p bus.Payload) {
	t.Helper()
	if err := b.Publish(context.Background(), bus.SubjectChatJob, p); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deadLetters collects what reaches the DLQ.
func deadLetters(t *testing.T, b *bus.Bus) func() []bus.DeadLetter {
	t.Helper()
	var mu sync.Mutex
	var got []bus.DeadLetter
	w, err := bus.ConsumeDeadLetters(context.Background(), b, bus.DeadLetterConsumer(), func(_ context.Context, d *bus.Delivery[bus.DeadLetter]) error {
		mu.Lock()
		got = append(got, d.Msg)
		mu.Unlock()
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return func() []bus.DeadLetter {
		mu.Lock()
		defer mu.Unlock()
		return append([]bus.DeadLetter(nil), got...)
	}
}

func streamMsgs(t *testing.T, b *bus.Bus, name string) uint64 {
	t.Helper()
	s, err := b.RawJetStream().Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestAckRemovesFromWorkQueue(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	var got atomic.Int64
	w, err := bus.Consume(context.Background(), b, fast(3), func(_ context.Context, d *bus.Delivery[ping]) error {
		got.Add(int64(d.Msg.N))
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := 1; i <= 10; i++ {
		publish(t, b, ping{ID: "p" + strconv.Itoa(i), N: i})
	}
	eventually(t, "all handled", func() bool { return got.Load() == 55 })
	eventually(t, "stream empty", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
}

// A worker that dies holding a message (its ack never comes) does not lose it: after
// AckWait another worker gets it, as delivery 2.
func TestRedeliveryAfterDroppedAck(t *testing.T) {
	t.Parallel()
	b, url := bustest.New(t)
	dying := bustest.Connect(t, url)
	started := make(chan struct{})
	w1, err := bus.Consume(context.Background(), dying, fast(5), func(ctx context.Context, d *bus.Delivery[ping]) error {
		close(started)
		<-ctx.Done() // never finishes: the process "dies" below
		return ctx.Err()
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	publish(t, b, ping{ID: "lost-ack", N: 1})
	<-started
	dying.RawConn().Close() // the crash: no ack, no nak, connection gone
	defer w1.Stop()

	attempts := make(chan int, 4)
	w2, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		attempts <- d.Attempt
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	select {
	case n := <-attempts:
		if n != 2 {
			t.Fatalf("redelivered as attempt %d, want 2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("message was not redelivered after the worker died")
	}
}

// The same message id published twice is stored once and handled once.
func TestDedupeByMsgID(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	for range 3 {
		publish(t, b, ping{ID: "same", N: 1})
	}
	publish(t, b, ping{ID: "other", N: 100})
	if n := streamMsgs(t, b, bus.StreamJobs); n != 2 {
		t.Fatalf("stream holds %d messages, want 2", n)
	}
	var calls atomic.Int64
	var sum atomic.Int64
	w, err := bus.Consume(context.Background(), b, fast(3), func(_ context.Context, d *bus.Delivery[ping]) error {
		calls.Add(1)
		sum.Add(int64(d.Msg.N))
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	eventually(t, "both handled", func() bool { return sum.Load() == 101 })
	if c := calls.Load(); c != 2 {
		t.Fatalf("handler called %d times, want 2", c)
	}
}

// A handler that keeps failing is retried MaxDeliver times, then the message is
// dead-lettered with its reason, origin and delivery count.
func TestMaxDeliverGoesToDLQ(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	dl := deadLetters(t, b)
	var calls atomic.Int64
	w, err := bus.Consume(context.Background(), b, fast(3), func(_ context.Context, d *bus.Delivery[ping]) error {
		calls.Add(1)
		return bus.Retry(10*time.Millisecond, errors.New("upstream 503"))
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	publish(t, b, ping{ID: "doomed", N: 1})
	eventually(t, "a dead letter", func() bool { return len(dl()) == 1 })
	d := dl()[0]
	if d.Deliveries != 3 || d.Stream != bus.StreamJobs || d.Consumer != bus.ConsumerChat || d.Subject != bus.SubjectChatJob {
		t.Fatalf("dead letter = %+v", d)
	}
	if d.MsgKind != "test.ping.v1" {
		t.Errorf("kind = %q", d.MsgKind)
	}
	if c := calls.Load(); c != 3 {
		t.Errorf("handler called %d times, want 3", c)
	}
	eventually(t, "work queue empty", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
}

// A message that cannot be decoded goes to the DLQ on its first delivery and never
// reaches the handler.
func TestUndecodableGoesToDLQWithoutRetry(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	dl := deadLetters(t, b)
	var calls atomic.Int64
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		calls.Add(1)
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, body := range []string{`not json`, `{"kind":"other.kind.v1","id":"x","data":{}}`, `{"kind":"test.ping.v1","data":{"n":1}}`} {
		m := nats.NewMsg(bus.SubjectChatJob)
		m.Data = []byte(body)
		m.Header.Set(nats.MsgIdHdr, fmt.Sprint("garbage-", i))
		if _, err := b.RawJetStream().PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "three dead letters", func() bool { return len(dl()) == 3 })
	for _, d := range dl() {
		if d.Deliveries != 1 {
			t.Errorf("undecodable message delivered %d times before dead-lettering, want 1 (%s)", d.Deliveries, d.Reason)
		}
	}
	if c := calls.Load(); c != 0 {
		t.Errorf("handler saw %d undecodable messages", c)
	}
}

// Permanent dead-letters at once.
func TestPermanentGoesToDLQAtOnce(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	dl := deadLetters(t, b)
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		return bus.Permanent(errors.New("tenant unknown"))
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	publish(t, b, ping{ID: "perm", N: 1})
	eventually(t, "a dead letter", func() bool { return len(dl()) == 1 })
	if d := dl()[0]; d.Deliveries != 1 || d.Reason != "permanent: tenant unknown" {
		t.Fatalf("dead letter = %+v", d)
	}
}

// Retry(d) redelivers, and not before the delay.
func TestRetryNaksWithDelay(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	var mu sync.Mutex
	var seen []time.Time
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		mu.Lock()
		seen = append(seen, time.Now())
		mu.Unlock()
		if d.Attempt == 1 {
			return bus.Retry(400*time.Millisecond, errors.New("429"))
		}
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	publish(t, b, ping{ID: "later", N: 1})
	eventually(t, "second attempt", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 2 })
	mu.Lock()
	gap := seen[1].Sub(seen[0])
	mu.Unlock()
	if gap < 350*time.Millisecond {
		t.Fatalf("redelivered after %s, before the 400ms asked for", gap)
	}
}

// A handler running longer than AckWait keeps its message with in-progress
// heartbeats: it is not redelivered meanwhile.
func TestHeartbeatKeepsLongWorkAlive(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	var calls atomic.Int64
	done := make(chan struct{})
	o := opts()
	o.Heartbeat = 150 * time.Millisecond
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		if calls.Add(1) == 1 {
			time.Sleep(2 * time.Second) // ~3× AckWait
			close(done)
		}
		return nil
	}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	publish(t, b, ping{ID: "long", N: 1})
	<-done
	eventually(t, "stream empty", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
	if c := calls.Load(); c != 1 {
		t.Fatalf("long message handled %d times, want 1", c)
	}
}

// A panicking handler does not kill the consumer; the message is retried.
func TestPanicIsRetried(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	var calls atomic.Int64
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	publish(t, b, ping{ID: "panics", N: 1})
	eventually(t, "retried after panic", func() bool { return calls.Load() == 2 })
	eventually(t, "acked", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
}

// Drain lets in-flight work finish and acknowledges it; nothing is redelivered.
func TestDrainFinishesInFlight(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	started := make(chan struct{})
	var finished atomic.Bool
	w, err := bus.Consume(context.Background(), b, fast(5), func(_ context.Context, d *bus.Delivery[ping]) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		finished.Store(true)
		return nil
	}, opts())
	if err != nil {
		t.Fatal(err)
	}
	publish(t, b, ping{ID: "inflight", N: 1})
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !finished.Load() {
		t.Fatal("Drain returned before the in-flight handler finished")
	}
	eventually(t, "acked", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
}

// Two workers on one durable consumer share its messages.
func TestWorkersShareConsumer(t *testing.T) {
	t.Parallel()
	b, url := bustest.New(t)
	var a, c atomic.Int64
	slow := func(n *atomic.Int64) bus.Handler[ping] {
		return func(_ context.Context, d *bus.Delivery[ping]) error {
			n.Add(1)
			time.Sleep(5 * time.Millisecond)
			return nil
		}
	}
	w1, err := bus.Consume(context.Background(), b, fast(3), slow(&a), opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Stop()
	w2, err := bus.Consume(context.Background(), bustest.Connect(t, url), fast(3), slow(&c), opts())
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	for i := range 100 {
		publish(t, b, ping{ID: "s" + strconv.Itoa(i), N: 1})
	}
	eventually(t, "all handled", func() bool { return a.Load()+c.Load() == 100 })
	if a.Load() == 0 || c.Load() == 0 {
		t.Fatalf("work not shared: %d / %d", a.Load(), c.Load())
	}
}

// A message whose worker dies on every delivery gets no outcome from any handler; the
// server's max-deliveries advisory moves it to the DLQ.
func TestWorkerDiesEveryTimeGoesToDLQ(t *testing.T) {
	t.Parallel()
	b, url := bustest.New(t)
	stop, err := b.WatchMaxDeliveries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dl := deadLetters(t, b)
	publish(t, b, ping{ID: "cursed", N: 1})
	spec := bus.ChatConsumer(bus.Timing{AckWait: 300 * time.Millisecond, MaxDeliver: 2, MaxAckPending: 10})
	for attempt := 1; attempt <= 2; attempt++ {
		conn := bustest.Connect(t, url)
		got := make(chan struct{})
		w, err := bus.Consume(context.Background(), conn, spec, func(ctx context.Context, d *bus.Delivery[ping]) error {
			close(got)
			<-ctx.Done()
			return ctx.Err()
		}, opts())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d never came", attempt)
		}
		conn.RawConn().Close() // dies holding the message
		w.Stop()
	}
	eventually(t, "a dead letter", func() bool { return len(dl()) == 1 })
	if d := dl()[0]; d.Deliveries != 2 || d.Consumer != bus.ConsumerChat {
		t.Fatalf("dead letter = %+v", d)
	}
	eventually(t, "removed from the work queue", func() bool { return streamMsgs(t, b, bus.StreamJobs) == 0 })
}

// Streams are created idempotently: every process calls EnsureStreams at start.
func TestEnsureStreamsIdempotent(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	for range 3 {
		if err := b.EnsureStreams(context.Background(), bus.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cfg := range bus.Streams(bus.Limits{}) {
		s, err := b.RawJetStream().Stream(context.Background(), cfg.Name)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := s.Info(context.Background())
		if info.Config.Duplicates != bus.DuplicateWindow {
			t.Errorf("%s duplicate window = %s", cfg.Name, info.Config.Duplicates)
		}
		if cfg.Name != bus.StreamEvents && cfg.Name != bus.StreamDLQ && info.Config.Retention != jetstream.WorkQueuePolicy {
			t.Errorf("%s retention = %s", cfg.Name, info.Config.Retention)
		}
	}
}

// A stream whose configuration drifted (an operator changed a limit) is brought back.
func TestEnsureStreamsRepairsDrift(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	ctx := context.Background()
	cfg := bus.Streams(bus.Limits{})[0]
	cfg.MaxMsgs = 5
	if _, err := b.RawJetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := b.EnsureStreams(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	s, _ := b.RawJetStream().Stream(ctx, cfg.Name)
	info, _ := s.Info(ctx)
	if info.Config.MaxMsgs != bus.DefaultLimits.MaxQueued {
		t.Fatalf("MaxMsgs = %d after EnsureStreams, want %d", info.Config.MaxMsgs, bus.DefaultLimits.MaxQueued)
	}
}

// EnsureConsumer leaves a consumer that is already as configured alone (every process
// calls it at start; an update dropped the other workers' pulls on a cluster) and
// updates one whose settings changed.
func TestEnsureConsumerUpdatesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	ctx := context.Background()
	spec := fast(3)
	c1, err := b.EnsureConsumer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := b.EnsureConsumer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !c2.CachedInfo().Created.Equal(c1.CachedInfo().Created) || c2.CachedInfo().Config.MaxAckPending != 100 {
		t.Fatalf("the same spec again: %+v", c2.CachedInfo().Config)
	}
	spec.Config.MaxAckPending = 250
	c3, err := b.EnsureConsumer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c3.Info(ctx)
	if err != nil || info.Config.MaxAckPending != 250 {
		t.Fatalf("changed MaxAckPending not applied: %v %+v", err, info)
	}
}

// A publish whose acknowledgement never comes (a node that died after taking it, here
// a listener that never answers) fails within the connection's ack timeout: Wait with a
// context that never ends does not hold its caller forever.
func TestWaitBoundsALostAcknowledgement(t *testing.T) {
	t.Parallel()
	url := bustest.Server(t)
	b := bustest.Connect(t, url, bus.WithPublishAckTimeout(300*time.Millisecond))
	silent, err := b.RawConn().SubscribeSync(b.Subject("test.silent"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	if err := b.RawConn().Flush(); err != nil {
		t.Fatal(err)
	}
	p, err := b.PublishAsync(context.Background(), "test.silent", ping{ID: "lost"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- bus.Wait(context.Background(), p) }()
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			t.Fatalf("Wait = %v, want the ack timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still waits for an acknowledgement that will never come")
	}
	if _, err := silent.NextMsg(time.Second); err != nil {
		t.Fatalf("the publish never left: %v", err)
	}
}

// Streams kept in memory are made within what the server can reserve: the event
// stream's file-storage bound (FLEET_EVENTS_MAX_BYTES, 4 GiB by default) is brought
// within memory, which the embedded server (1 GiB of JetStream memory) would refuse.
func TestEnsureStreamsInMemoryBoundsTheEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := bus.Connect(ctx, bustest.Server(t), t.Name(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer b.RawConn().Close()
	if err := b.EnsureStreams(ctx, bus.Limits{Memory: true, EventsMaxBytes: 4 << 30}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bus.StreamJobs, bus.StreamEvents} {
		s, err := b.RawJetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c := info.Config; c.Storage != jetstream.MemoryStorage || (name == bus.StreamEvents && (c.MaxBytes <= 0 || c.MaxBytes > 1<<30)) {
			t.Errorf("%s: %s storage, at most %d bytes", name, c.Storage, c.MaxBytes)
		}
	}
}
