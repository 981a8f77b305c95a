package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Delivery is one delivery of a message to a handler.
type Delivery[T Payload] struct {
	Msg T
	// ID is the message id (the Nats-Msg-Id it was published with).
	ID      string
	Subject string
	// Attempt is this delivery's number, from 1.
	Attempt int
	// MaxDeliver is the consumer's delivery limit (≤ 0: unlimited).
	MaxDeliver int
	// Published is when the message was first published.
	Published time.Time
	// Data is the message as it arrived (the envelope), for storing without
	// encoding it again.
	Data []byte
	raw  jetstream.Msg
}

// Last reports whether this is the last delivery the consumer allows: a handler that
// would retry should instead finish the work visibly (a failed job, an error result).
func (d *Delivery[T]) Last() bool { return d.MaxDeliver > 0 && d.Attempt >= d.MaxDeliver }

// Handler handles one delivery; its error decides the message's fate (see Decide).
type Handler[T Payload] func(ctx context.Context, d *Delivery[T]) error

// ConsumeOptions tune a consumer.
type ConsumeOptions struct {
	// Concurrency is how many messages one process handles at once (default 16). The
	// consumer's MaxAckPending bounds the total across processes.
	Concurrency int
	// Heartbeat is how often a running handler's message is marked in progress
	// (default AckWait/3), so long work is not redelivered while it runs.
	Heartbeat time.Duration
	// Log receives consume errors.
	Log *slog.Logger
	// Observe, if set, is told each outcome, for metrics.
	Observe func(consumer string, d Decision, elapsed time.Duration)
	// InFlight, if set, is told +1 when a delivery starts and -1 when its handler has
	// returned, for the in-flight steps gauge.
	InFlight func(consumer string, delta int)
}

// Worker consumes one durable consumer.
type Worker struct {
	name string
	// stopTaking stops taking new messages (Drain); stopNow drops buffered ones too
	// (Stop).
	stopTaking, stopNow func()
	wg                  sync.WaitGroup
	loopDone            chan struct{}
	hardStop            context.CancelFunc
}

// Consume starts handling spec's messages with h until Drain or Stop. Messages that do
// not decode as T are dead-lettered without reaching h. T must be a value type (not a
// pointer) whose Kind method has a value receiver.
func Consume[T Payload](ctx context.Context, b *Bus, spec ConsumerSpec, h Handler[T], o ConsumeOptions) (*Worker, error) {
	return consume(ctx, b, spec, h, o, decodeMsg[T])
}

func consume[T Payload](ctx context.Context, b *Bus, spec ConsumerSpec, h Handler[T], o ConsumeOptions, decode func(jetstream.Msg) (T, string, time.Time, error)) (*Worker, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = spec.Config.AckWait / 3
		if o.Heartbeat <= 0 {
			o.Heartbeat = 10 * time.Second
		}
	}
	if o.Log == nil {
		o.Log = b.log
	}
	cons, err := b.EnsureConsumer(ctx, spec)
	if err != nil {
		return nil, err
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(o.Concurrency), jetstream.PullHeartbeat(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", spec.Config.Durable, err)
	}
	// Handlers run on a context that outlives Drain (in-flight work finishes) but not
	// Stop.
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &Worker{name: spec.Config.Durable, stopTaking: iter.Drain, stopNow: iter.Stop, loopDone: make(chan struct{}), hardStop: cancel}
	r := &runner[T]{b: b, spec: spec, h: h, o: o, decode: decode}
	sem := make(chan struct{}, o.Concurrency)
	go func() {
		defer close(w.loopDone)
		for {
			sem <- struct{}{}
			// Next also ends with hctx: with NATS unreachable a draining iterator
			// never closes by itself, and a cut-short Drain must still return.
			msg, err := iter.Next(jetstream.NextContext(hctx))
			if err != nil {
				<-sem
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) || hctx.Err() != nil {
					return
				}
				o.Log.Warn("consume: next", "consumer", w.name, "err", err)
				select {
				case <-time.After(200 * time.Millisecond):
				case <-hctx.Done():
					return
				}
				continue
			}
			w.wg.Add(1)
			// A delivery holds its place until its handler has returned.
			go func() {
				defer func() {
					<-sem
					w.wg.Done()
				}()
				r.handle(hctx, msg)
			}()
		}
	}()
	return w, nil
}

// Drain stops taking new messages, lets buffered and in-flight ones finish, and
// returns when they have or ctx ends (then the rest are cancelled and naked, so another
// worker takes them at once).
func (w *Worker) Drain(ctx context.Context) error {
	w.stopTaking()
	done := make(chan struct{})
	go func() {
		<-w.loopDone
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		w.hardStop()
		return nil
	case <-ctx.Done():
		w.hardStop()
		<-done
		return fmt.Errorf("consumer %s: drain cut short: %w", w.name, ctx.Err())
	}
}

// Stop cancels in-flight handlers and stops at once.
func (w *Worker) Stop() {
	w.stopNow()
	w.hardStop()
	<-w.loopDone
	w.wg.Wait()
}

type runner[T Payload] struct {
	b      *Bus
	spec   ConsumerSpec
	h      Handler[T]
	o      ConsumeOptions
	decode func(jetstream.Msg) (T, string, time.Time, error)
	// delayed, if set, is told of each message naked for redelivery after a delay.
	delayed func(subject string, delay time.Duration)
}

func (r *runner[T]) handle(ctx context.Context, msg jetstream.Msg) {
	start := time.Now()
	meta, err := msg.Metadata()
	if err != nil {
		// Not a JetStream delivery; nothing to acknowledge.
		r.o.Log.Error("consume: message without metadata", "consumer", r.spec.Config.Durable, "err", err)
		return
	}
	if r.o.InFlight != nil {
		r.o.InFlight(r.spec.Config.Durable, 1)
		defer r.o.InFlight(r.spec.Config.Durable, -1)
	}
	d := &Delivery[T]{
		Subject:    r.b.localSubject(msg.Subject()),
		Attempt:    int(meta.NumDelivered),
		MaxDeliver: r.spec.Config.MaxDeliver,
		Data:       msg.Data(),
		raw:        msg,
	}
	stopBeats := r.heartbeat(d)
	var herr error
	d.Msg, d.ID, d.Published, herr = r.decode(msg)
	ctx, span := r.startDelivery(ctx, msg, d)
	if herr == nil {
		herr = r.run(ctx, d)
	}
	stopBeats()
	dec := Decide(herr, d.Attempt, d.MaxDeliver)
	r.apply(ctx, msg, meta, dec)
	if r.delayed != nil && dec.Action == Nak && dec.Delay > 0 {
		r.delayed(d.Subject, dec.Delay)
	}
	endDelivery(span, dec, herr)
	if r.o.Observe != nil {
		r.o.Observe(r.spec.Config.Durable, dec, time.Since(start))
	}
	var re *retryError
	if dec.Action != Ack && !(errors.As(herr, &re) && re.deferred && dec.Action == Nak) {
		r.o.Log.Warn("consume: message not done", "consumer", r.spec.Config.Durable, "subject", d.Subject,
			"id", d.ID, "attempt", d.Attempt, "action", dec.Action.String(), "delay", dec.Delay, "err", herr)
	}
}

func decodeMsg[T Payload](msg jetstream.Msg) (T, string, time.Time, error) {
	v, info, err := Decode[T](msg.Data())
	return v, info.ID, info.At, err
}

// heartbeat marks d's message in progress every Heartbeat until the returned stop is
// called, so long work is not redelivered while it runs. A timer, not a goroutine,
// waits between beats: a delivery in flight costs its handler's goroutine alone.
func (r *runner[T]) heartbeat(d *Delivery[T]) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	var beat func()
	beat = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		_ = d.raw.InProgress() // Decide's InProgress row: still working
		timer = time.AfterFunc(r.o.Heartbeat, beat)
	}
	mu.Lock()
	timer = time.AfterFunc(r.o.Heartbeat, beat)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		timer.Stop()
		mu.Unlock()
	}
}

// run calls the handler, turning a panic into an error.
func (r *runner[T]) run(ctx context.Context, d *Delivery[T]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.o.Log.Error("consume: handler panicked", "consumer", r.spec.Config.Durable, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return r.h(ctx, d)
}

// apply carries out a decision. A dead letter is stored in the DLQ before the message
// is terminated; if that fails the message is naked instead, so it is never lost.
func (r *runner[T]) apply(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, dec Decision) {
	var err error
	switch dec.Action {
	case Ack:
		err = msg.Ack()
	case Nak:
		if dec.Delay > 0 {
			err = msg.NakWithDelay(dec.Delay)
		} else {
			err = msg.Nak()
		}
	case InProgress:
		err = msg.InProgress()
	case TermDLQ:
		if meta.Stream == r.b.Name(StreamDLQ) {
			// A dead letter whose handling failed stays in the DLQ stream for
			// operators; dead-lettering it again would loop.
			r.o.Log.Error("consume: giving up on a dead letter", "consumer", r.spec.Config.Durable, "seq", meta.Sequence.Stream, "reason", dec.Reason)
			err = msg.Ack()
			break
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if derr := r.b.deadLetter(pctx, msg.Subject(), msg.Headers(), msg.Data(), meta, dec.Reason); derr != nil {
			r.o.Log.Error("consume: dead-lettering failed; will retry the message", "consumer", r.spec.Config.Durable, "err", derr)
			err = msg.NakWithDelay(Backoff(int(meta.NumDelivered)))
			break
		}
		err = msg.TermWithReason(truncateReason(dec.Reason))
	}
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		r.o.Log.Warn("consume: acknowledging", "consumer", r.spec.Config.Durable, "action", dec.Action.String(), "err", err)
	}
}

// deadLetter stores a message in the DLQ with why, where from and how often it was
// delivered. Its id is derived from the stream sequence, so doing it twice stores it
// once. subject and meta are as the server gave them (namespaced); the dead letter
// names them without the namespace.
func (b *Bus) deadLetter(ctx context.Context, subject string, h nats.Header, data []byte, meta *jetstream.MsgMetadata, reason string) error {
	subject, stream, consumer := b.localSubject(subject), b.localName(meta.Stream), familyOf(b.localName(meta.Consumer))
	m := nats.NewMsg(b.Subject(SubjectDLQ(stream, consumer)))
	m.Data = data
	if kind := h.Get(HeaderKind); kind != "" {
		m.Header.Set(HeaderKind, kind)
	}
	copyTrace(m.Header, h)
	m.Header.Set(nats.MsgIdHdr, "dlq:"+stream+":"+strconv.FormatUint(meta.Sequence.Stream, 10))
	m.Header.Set(HeaderDLQReason, truncateReason(reason))
	m.Header.Set(HeaderDLQSubject, subject)
	m.Header.Set(HeaderDLQStream, stream)
	m.Header.Set(HeaderDLQConsumer, consumer)
	m.Header.Set(HeaderDLQDeliver, strconv.FormatUint(meta.NumDelivered, 10))
	m.Header.Set(HeaderDLQSeq, strconv.FormatUint(meta.Sequence.Stream, 10))
	_, err := b.js.PublishMsg(ctx, m)
	return err
}

func truncateReason(s string) string {
	if len(s) > 512 {
		return s[:512]
	}
	return s
}
