package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A message reaches the DLQ two ways. A handler that fails on the last delivery (or
// says Permanent, or cannot be decoded) is dead-lettered by its consumer. A message
// whose worker died on every delivery never gets an outcome at all: the server stops
// redelivering it and announces that with a max-deliveries advisory, which
// WatchMaxDeliveries turns into a dead letter. Either way the dead letter is then read
// by the deadletters consumer (ConsumeDeadLetters), where the application makes the
// failure visible: a failed job, an error result for the model. Nothing accepted
// disappears without a trace.

// The durable consumers that make dead letters visible, one per role that owns them.
const (
	ConsumerDeadLetters        = "deadletters"
	ConsumerIngressDeadLetters = "deadletters-ingress"
)

// DeadLetterConsumer makes the chat role's dead letters visible: jobs, resumes and
// searches (a dead job fails, a dead search becomes an error result the model reads).
func DeadLetterConsumer() ConsumerSpec {
	c := consumer(StreamDLQ, ConsumerDeadLetters, "", "chat role: make dead jobs, resumes and searches visible",
		Timing{AckWait: 30 * time.Second, MaxDeliver: 10, MaxAckPending: 256})
	c.Config.FilterSubjects = []string{SubjectDLQ(StreamJobs, ConsumerChat), subjectDLQ + StreamChat + ".>", subjectDLQ + StreamSearch + ".>"}
	return c
}

// IngressDeadLetterConsumer makes the ingress role's dead letters visible, where that
// role runs: webhook deliveries, batch expansions, finish hooks.
func IngressDeadLetterConsumer() ConsumerSpec {
	c := consumer(StreamDLQ, ConsumerIngressDeadLetters, "", "ingress role: make dead webhooks, batch expansions and finish hooks visible",
		Timing{AckWait: 30 * time.Second, MaxDeliver: 10, MaxAckPending: 256})
	c.Config.FilterSubjects = []string{subjectDLQ + StreamWebhooks + ".>", SubjectDLQ(StreamJobs, ConsumerExpand), subjectDLQ + StreamEvents + ".>"}
	return c
}

// DeadLetter is a message that reached the DLQ.
type DeadLetter struct {
	// MsgKind is the original message's kind ("" if it had none).
	MsgKind string
	// Subject, Stream and Consumer say where it came from.
	Subject  string
	Stream   string
	Consumer string
	// Reason says why it was dead-lettered.
	Reason string
	// Deliveries is how often it was delivered.
	Deliveries int
	// Data is the original message body.
	Data []byte
	id   string
}

// Kind of the DeadLetter pseudo-payload.
func (DeadLetter) Kind() string { return "dlq.v1" }

// MsgID is the dead letter's id.
func (d DeadLetter) MsgID() string { return d.id }

// ConsumeDeadLetters handles the dead letters of spec (DeadLetterConsumer or
// IngressDeadLetterConsumer) with h. A dead letter whose handling
// keeps failing is logged and acknowledged after the last delivery; it stays in the
// DLQ stream for operators.
func ConsumeDeadLetters(ctx context.Context, b *Bus, spec ConsumerSpec, h Handler[DeadLetter], o ConsumeOptions) (*Worker, error) {
	return consume(ctx, b, spec, h, o, decodeDeadLetter)
}

func decodeDeadLetter(msg jetstream.Msg) (DeadLetter, string, time.Time, error) {
	h := msg.Headers()
	n, _ := strconv.Atoi(h.Get(HeaderDLQDeliver))
	d := DeadLetter{
		MsgKind:    h.Get(HeaderKind),
		Subject:    h.Get(HeaderDLQSubject),
		Stream:     h.Get(HeaderDLQStream),
		Consumer:   h.Get(HeaderDLQConsumer),
		Reason:     h.Get(HeaderDLQReason),
		Deliveries: n,
		Data:       msg.Data(),
		id:         h.Get(nats.MsgIdHdr),
	}
	return d, d.id, time.Time{}, nil
}

// maxDeliveriesAdvisory is the server's JSConsumerDeliveryExceededAdvisory.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

const advisoryMaxDeliveries = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."

// WatchMaxDeliveries moves messages of the fleet's work queues that ran out of
// deliveries without an outcome into the DLQ. Every worker process may run it; a queue
// group hands each advisory to one of them. It listens to the advisories of its own
// namespace's work queues only, so fleets sharing a server never move each other's
// messages. It returns when the subscriptions are set up.
func (b *Bus) WatchMaxDeliveries(ctx context.Context) (stop func(), err error) {
	handle := func(m *nats.Msg) {
		var adv maxDeliveriesAdvisory
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			b.log.Warn("max-deliveries advisory unreadable", "err", err)
			return
		}
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.moveToDLQ(hctx, adv); err != nil {
			b.log.Error("moving an exhausted message to the DLQ", "stream", adv.Stream, "seq", adv.StreamSeq, "err", err)
		}
	}
	var subs []*nats.Subscription
	stop = func() {
		for _, s := range subs {
			s.Unsubscribe()
		}
	}
	for _, stream := range []string{StreamJobs, StreamChat, StreamSearch, StreamWebhooks} {
		sub, err := b.nc.QueueSubscribe(advisoryMaxDeliveries+b.Name(stream)+".>", b.Name("fleet-max-deliveries"), handle)
		if err != nil {
			stop()
			return nil, err
		}
		subs = append(subs, sub)
	}
	if err := b.nc.Flush(); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

func (b *Bus) moveToDLQ(ctx context.Context, adv maxDeliveriesAdvisory) error {
	s, err := b.js.Stream(ctx, adv.Stream)
	if err != nil {
		return err
	}
	raw, err := s.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // acknowledged or moved already
	}
	if err != nil {
		return err
	}
	meta := &jetstream.MsgMetadata{Stream: adv.Stream, Consumer: adv.Consumer, NumDelivered: adv.Deliveries}
	meta.Sequence.Stream = adv.StreamSeq
	reason := fmt.Sprintf("no outcome after %d deliveries: the worker handling it stopped each time", adv.Deliveries)
	if err := b.deadLetter(ctx, raw.Subject, raw.Header, raw.Data, meta, reason); err != nil {
		return err
	}
	if err := s.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	b.log.Warn("message dead-lettered after max deliveries", "stream", adv.Stream, "consumer", adv.Consumer, "seq", adv.StreamSeq, "subject", raw.Subject)
	return nil
}
