package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// What operators and autoscalers read about the queues: a consumer's backlog, a
// stream's size, the age of the oldest waiting message. Names are un-namespaced; the
// bus applies its namespace.

// Lag is a durable consumer's backlog as the server counts it.
type Lag struct {
	// Pending is num_pending: messages not yet delivered to any worker.
	Pending uint64
	// AckPending is num_ack_pending: delivered, not yet acknowledged.
	AckPending uint64
}

// FamilyLag is the backlog of a family of consumers: a durable consumer of that name
// and all its lane consumers (fair.go) added up, a family's whole backlog under its
// one name.
func (b *Bus) FamilyLag(ctx context.Context, stream, family string) (Lag, error) {
	var lag Lag
	s, err := b.js.Stream(ctx, b.Name(stream))
	if err != nil {
		return lag, fmt.Errorf("stream %s: %w", b.Name(stream), err)
	}
	prefix := b.Name(family) + laneSep
	infos := s.ListConsumers(ctx)
	for info := range infos.Info() {
		if info.Name == b.Name(family) || strings.HasPrefix(info.Name, prefix) {
			lag.Pending += info.NumPending
			lag.AckPending += uint64(info.NumAckPending)
		}
	}
	if err := infos.Err(); err != nil {
		return lag, fmt.Errorf("stream %s: listing consumers: %w", b.Name(stream), err)
	}
	return lag, nil
}

// StreamMessages is how many messages a stream holds (for the DLQ: dead letters).
func (b *Bus) StreamMessages(ctx context.Context, stream string) (uint64, error) {
	s, err := b.js.Stream(ctx, b.Name(stream))
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", b.Name(stream), err)
	}
	return s.CachedInfo().State.Msgs, nil
}

// OldestMessage is when the oldest message on subject still in stream was stored;
// ok is false when the stream holds none. On a work queue that is the oldest message
// not yet acknowledged: waiting for a worker, or being worked on.
func (b *Bus) OldestMessage(ctx context.Context, stream, subject string) (at time.Time, ok bool, err error) {
	s, err := b.js.Stream(ctx, b.Name(stream))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("stream %s: %w", b.Name(stream), err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 {
		return time.Time{}, false, nil
	}
	m, err := s.GetMsg(ctx, st.FirstSeq, jetstream.WithGetMsgSubject(b.Subject(subject)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("stream %s: %w", b.Name(stream), err)
	}
	return m.Time, true, nil
}
