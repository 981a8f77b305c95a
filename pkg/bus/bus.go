// Package bus is the fleet's messaging layer on NATS JetStream: the streams, subjects
// and durable consumers (subjects.go, mirrored in deploy/nats/), a typed envelope with
// a stable kind and a deterministic Nats-Msg-Id (envelope.go), typed consumers whose
// handler outcome decides ack, nak-with-delay, term + dead-letter or in-progress through
// one table (outcome.go), heartbeats for long work and graceful drain (consume.go), and
// the dead-letter path, including messages whose worker died on every attempt
// (dlq.go).
package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// Bus is a connection to NATS with JetStream.
type Bus struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
	ns  string // FLEET_NAMESPACE (namespace.go)
	// ackWait bounds the wait for an asynchronous publish's acknowledgement
	// (PublishAckTimeout; tests shorten it).
	ackWait time.Duration

	mu     sync.Mutex
	events jetstream.Stream // EVENTS, looked up on first use
}

// Connect dials url and retries until ctx ends, reconnecting forever afterwards:
// a worker rides out a NATS restart instead of exiting.
func Connect(ctx context.Context, url, name string, log *slog.Logger, opts ...Option) (*Bus, error) {
	return connect(ctx, url, name, log, opts, nil)
}

// connect dials url, or, with an in-process server, connects to it without a socket.
func connect(ctx context.Context, url, name string, log *slog.Logger, bopts []Option, extra []nats.Option) (*Bus, error) {
	if log == nil {
		log = slog.Default()
	}
	b := &Bus{log: log, ackWait: PublishAckTimeout}
	for _, o := range bopts {
		o(b)
	}
	if err := ValidateNamespace(b.ns); err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connecting to %s: %w", redact.URL(url), err)
	}
	for !nc.IsConnected() {
		select {
		case <-ctx.Done():
			nc.Close()
			return nil, fmt.Errorf("nats: %s not reachable: %w", redact.URL(url), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(b.ackWait))
	if err != nil {
		nc.Close()
		return nil, err
	}
	b.nc, b.js = nc, js
	return b, nil
}

// Close drains the connection: pending publishes are flushed first.
func (b *Bus) Close() {
	if err := b.nc.Drain(); err != nil {
		b.nc.Close()
	}
}

// EnsureStreams creates every stream of the fleet that is missing and updates one
// whose configuration differs. It is idempotent and every process calls it at start;
// a stream already as configured is left alone (an update request for nothing would
// still make the server rewrite the stream's config, racing consumer creation by
// other processes).
func (b *Bus) EnsureStreams(ctx context.Context, l Limits) error {
	for _, want := range Streams(l) {
		want.Name, want.Subjects = b.Name(want.Name), b.subjects(want.Subjects)
		err := retryTransient(ctx, func(ctx context.Context) error {
			s, err := b.js.Stream(ctx, want.Name)
			switch {
			case errors.Is(err, jetstream.ErrStreamNotFound):
				_, err = b.js.CreateStream(ctx, want)
				if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
					err = nil // another process made it first
				}
			case err == nil:
				if streamDiffers(s.CachedInfo().Config, want) {
					_, err = b.js.UpdateStream(ctx, want)
				}
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("stream %s: %w", want.Name, err)
		}
	}
	return nil
}

// streamDiffers reports whether a stream's configuration differs from the fleet's in
// a field the fleet sets (the server fills unset limits with -1).
func streamDiffers(have, want jetstream.StreamConfig) bool {
	limit := func(h, w int64) bool { return h != w && !(w == 0 && h == -1) }
	return have.Description != want.Description || !slices.Equal(have.Subjects, want.Subjects) ||
		have.Retention != want.Retention || have.Discard != want.Discard || have.Storage != want.Storage ||
		have.Replicas != want.Replicas || have.Duplicates != want.Duplicates || have.MaxAge != want.MaxAge ||
		limit(have.MaxMsgs, want.MaxMsgs) || limit(have.MaxBytes, want.MaxBytes)
}

// EnsureConsumer creates or updates a durable consumer (spec names it without the
// namespace; the bus applies its own), riding out a JetStream cluster that is failing
// over (retryTransient).
func (b *Bus) EnsureConsumer(ctx context.Context, spec ConsumerSpec) (jetstream.Consumer, error) {
	cfg := spec.Config
	cfg.Durable, cfg.Name = b.Name(cfg.Durable), ""
	if spec.Config.Name != "" {
		cfg.Name = b.Name(spec.Config.Name)
	}
	if cfg.FilterSubject != "" {
		cfg.FilterSubject = b.Subject(cfg.FilterSubject)
	}
	cfg.FilterSubjects = b.subjects(cfg.FilterSubjects)
	var c jetstream.Consumer
	err := retryTransient(ctx, func(ctx context.Context) (err error) {
		// A consumer already as configured is left alone, as streams are: on a
		// JetStream cluster an update, even to the same settings, dropped the pull
		// requests of the workers already reading it, which then sat idle until
		// their heartbeat timed out (every process updates at start).
		// Processes starting together race to make it: a create with the same settings
		// is answered with the existing consumer, not an update, and only a consumer
		// whose settings changed is updated.
		if have, err := b.js.Consumer(ctx, b.Name(spec.Stream), cfg.Durable); err == nil && !consumerDiffers(have.CachedInfo().Config, cfg) {
			c = have
			return nil
		}
		c, err = b.js.CreateConsumer(ctx, b.Name(spec.Stream), cfg)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			c, err = b.js.UpdateConsumer(ctx, b.Name(spec.Stream), cfg)
		}
		return err
	})
	if err == nil {
		err = b.awaitLeader(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s/%s: %w", b.Name(spec.Stream), cfg.Durable, err)
	}
	return c, nil
}

// awaitLeader returns once a consumer on a JetStream cluster has a leader. A consumer
// is created before its replicas have elected one, and the pull requests a worker
// sends in that gap reach nobody: the worker that created it idled until its pull
// heartbeat lapsed (about 10 s) while the workers started a moment later took all the
// work (found by the e2e suite on a 3-node cluster). A leaderless consumer's info is
// answered by the meta leader, without cluster details; its leader answers with them.
func (b *Bus) awaitLeader(ctx context.Context, c jetstream.Consumer) error {
	if b.nc.ConnectedClusterName() == "" {
		return nil // a single server: the consumer is served as soon as it exists
	}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		var info *jetstream.ConsumerInfo
		err := retryTransient(ctx, func(ctx context.Context) (err error) {
			info, err = c.Info(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("waiting for its leader: %w", err)
		}
		if info.Cluster != nil && info.Cluster.Leader != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for its leader: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// consumerDiffers reports whether a consumer's configuration differs from the fleet's
// in a setting the fleet sets (the server fills in the others).
func consumerDiffers(have, want jetstream.ConsumerConfig) bool {
	return have.Description != want.Description || have.FilterSubject != want.FilterSubject ||
		!slices.Equal(have.FilterSubjects, want.FilterSubjects) || have.AckPolicy != want.AckPolicy ||
		have.DeliverPolicy != want.DeliverPolicy || have.AckWait != want.AckWait || have.MaxDeliver != want.MaxDeliver ||
		have.MaxAckPending != want.MaxAckPending || have.ReplayPolicy != want.ReplayPolicy ||
		!slices.Equal(have.BackOff, want.BackOff) || have.InactiveThreshold != want.InactiveThreshold
}

// ErrQueueFull means a work queue is at its limit: back-pressure, retry later.
var ErrQueueFull = errors.New("bus: queue full")

// Publish publishes p on subject and waits for the stream to store it. A duplicate
// (same message id within the duplicate window) is not an error.
func (b *Bus) Publish(ctx context.Context, subject string, p Payload) error {
	m, err := Encode(subject, p)
	if err != nil {
		return err
	}
	return b.PublishMsg(ctx, m)
}

// PublishMsg publishes a message built by Encode (and given headers of its own) on
// its subject in the bus's namespace, and waits for the stream to store it.
func (b *Bus) PublishMsg(ctx context.Context, m *nats.Msg) error {
	subject := m.Subject
	m.Subject = b.Subject(subject)
	trace.Inject(ctx, m.Header)
	if _, err := b.js.PublishMsg(ctx, m); err != nil {
		return publishError(subject, err)
	}
	return nil
}

// Emit publishes p into its stream without waiting for (or asking for) the stream's
// acknowledgement: the message is stored and deduplicated like any other, but the
// publisher does not learn whether it was. For progress events, whose loss costs a
// line of a job's event log, never the job; everything else uses Publish.
func (b *Bus) Emit(subject string, p Payload) error {
	m, err := Encode(b.Subject(subject), p)
	if err != nil {
		return err
	}
	return b.nc.PublishMsg(m)
}

// Pending is a publish whose acknowledgement has not been awaited yet.
type Pending struct {
	subject string
	f       jetstream.PubAckFuture
}

// PublishAckTimeout is how long a publish waits for the stream's acknowledgement. An
// acknowledgement can be lost, not refused: a NATS node that dies between storing a
// message and answering leaves the publisher no reply at all, and without a bound
// Wait would hold its caller (an HTTP request, a worker's step) until its context
// ends, which for a request is when the client gives up. The stream's leader moves
// to a live node within a few seconds; a publish not acknowledged by then fails, and
// the caller refuses the job (503) or retries its step.
const PublishAckTimeout = 10 * time.Second

// PublishAsync publishes p without waiting; Wait collects the acknowledgements. Use it
// to put several messages of one step in flight at once. An acknowledgement that does
// not come within PublishAckTimeout is an error. ctx's trace context goes with the
// message; ctx does not bound the publish (Wait's does).
func (b *Bus) PublishAsync(ctx context.Context, subject string, p Payload) (Pending, error) {
	m, err := Encode(b.Subject(subject), p)
	if err != nil {
		return Pending{}, err
	}
	trace.Inject(ctx, m.Header)
	f, err := b.js.PublishMsgAsync(m)
	if err != nil {
		return Pending{}, publishError(subject, err)
	}
	return Pending{subject: subject, f: f}, nil
}

// Wait waits for every pending publish to be stored.
func Wait(ctx context.Context, ps ...Pending) error {
	var errs []error
	for _, p := range ps {
		if p.f == nil {
			continue
		}
		select {
		case <-p.f.Ok():
		case err := <-p.f.Err():
			errs = append(errs, publishError(p.subject, err))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

func publishError(subject string, err error) error {
	// A DiscardNew stream at its limit answers 503 with error code 10077
	// ("maximum messages exceeded").
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStreamStoreFailed {
		return fmt.Errorf("%w: %s: %v", ErrQueueFull, subject, err)
	}
	return fmt.Errorf("publish %s: %w", subject, err)
}

const jsErrStreamStoreFailed jetstream.ErrorCode = 10077
