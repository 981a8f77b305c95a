package bus

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The helpers below are the only way fleet code outside this package reaches the
// connection: each takes the fleet's own subject, stream or bucket name and applies the
// bus's namespace, so no caller can forget it.

// Subscribe calls fn with each message on the plain-NATS subject (such as
// SubjectEventsAll) in the bus's namespace.
func (b *Bus) Subscribe(subject string, fn nats.MsgHandler) (*nats.Subscription, error) {
	return b.nc.Subscribe(b.Subject(subject), fn)
}

// ChanSubscribe sends each message on the plain-NATS subject in the bus's namespace to
// ch; a message that finds ch full is dropped (the subscription's slow-consumer error).
func (b *Bus) ChanSubscribe(subject string, ch chan *nats.Msg) (*nats.Subscription, error) {
	return b.nc.ChanSubscribe(b.Subject(subject), ch)
}

// SubscribeSync subscribes to the plain-NATS subject in the bus's namespace; the
// caller reads its messages with NextMsg.
func (b *Bus) SubscribeSync(subject string) (*nats.Subscription, error) {
	return b.nc.SubscribeSync(b.Subject(subject))
}

// OrderedConsumer creates an ordered consumer on stream (a fleet stream such as
// StreamEvents) reading cfg.FilterSubjects (fleet subjects), both in the bus's
// namespace.
func (b *Bus) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	cfg.FilterSubjects = b.subjects(cfg.FilterSubjects)
	return b.js.OrderedConsumer(ctx, b.Name(stream), cfg)
}

// DeleteConsumer deletes the consumer name of stream (a fleet stream, in the bus's
// namespace). name is the consumer's own name on the server, such as the one an
// OrderedConsumer's info gives.
func (b *Bus) DeleteConsumer(ctx context.Context, stream, name string) error {
	return b.js.DeleteConsumer(ctx, b.Name(stream), name)
}

// ObjectStore creates, or updates to cfg, the object store cfg.Bucket (a fleet bucket
// such as BucketFiles) in the bus's namespace and returns it. A zero cfg.Replicas
// takes the JOBS stream's replica count, so the objects are as durable as the jobs.
func (b *Bus) ObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	cfg.Bucket = b.Name(cfg.Bucket)
	if cfg.Replicas == 0 {
		cfg.Replicas = b.jobsReplicas(ctx)
	}
	return b.js.CreateOrUpdateObjectStore(ctx, cfg)
}

// jobsReplicas is the JOBS stream's replica count (1 when it cannot be read).
func (b *Bus) jobsReplicas(ctx context.Context) int {
	st, err := b.js.Stream(ctx, b.Name(StreamJobs))
	if err != nil {
		return 1
	}
	return max(st.CachedInfo().Config.Replicas, 1)
}

// Connected reports whether the connection is up, and its status in words (for a
// readiness probe's log).
func (b *Bus) Connected() (ok bool, status string) {
	return b.nc.IsConnected(), b.nc.Status().String()
}

// RawConn is the underlying NATS connection, for tests and harnesses that inspect or
// break it (count subscriptions, close it as a crash would). Fleet code uses the
// helpers above, which apply the namespace.
func (b *Bus) RawConn() *nats.Conn { return b.nc }

// RawJetStream is the underlying JetStream context, for tests and harnesses that read
// streams or publish as another process would; names given to it are not namespaced.
// Fleet code uses the helpers above.
func (b *Bus) RawJetStream() jetstream.JetStream { return b.js }
