package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// terminalEvent is a job's terminal event on the EVENTS stream.
type terminalEvent struct {
	typ string
	at  time.Time
}

// deadLetter is one DLQ entry that names a job.
type deadLetter struct {
	job, subject, reason string
}

// streamFacts is what the harness reads from JetStream after a scenario.
type streamFacts struct {
	terminal map[string][]terminalEvent // job → its terminal events
	dlq      []deadLetter
	dlqTotal int
}

// readStreams reads every terminal event on EVENTS and every dead letter on DLQ.
func readStreams(ctx context.Context, natsURL string) (*streamFacts, error) {
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	f := &streamFacts{terminal: map[string][]terminalEvent{}}
	type envelope struct {
		At   time.Time `json:"at"`
		Data struct {
			JobID string `json:"job_id"`
			Type  string `json:"type"`
			At    time.Time
		} `json:"data"`
	}
	err = readAll(ctx, js, bus.StreamEvents, func(m jetstream.Msg) {
		var e envelope
		if json.Unmarshal(m.Data(), &e) != nil {
			return
		}
		switch bus.EventType(e.Data.Type) {
		case bus.EventCompleted, bus.EventFailed, bus.EventCancelled:
			at := e.Data.At
			if at.IsZero() {
				at = e.At
			}
			f.terminal[e.Data.JobID] = append(f.terminal[e.Data.JobID], terminalEvent{typ: e.Data.Type, at: at})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", bus.StreamEvents, err)
	}
	err = readAll(ctx, js, bus.StreamDLQ, func(m jetstream.Msg) {
		f.dlqTotal++
		var e envelope
		json.Unmarshal(m.Data(), &e)
		f.dlq = append(f.dlq, deadLetter{job: e.Data.JobID, subject: m.Headers().Get(bus.HeaderDLQSubject), reason: m.Headers().Get(bus.HeaderDLQReason)})
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", bus.StreamDLQ, err)
	}
	return f, nil
}

// readAll calls fn on every message the stream holds now.
func readAll(ctx context.Context, js jetstream.JetStream, stream string, fn func(jetstream.Msg)) error {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	want := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return err
	}
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		n := 0
		var last uint64
		for m := range batch.Messages() {
			n++
			fn(m)
			if md, err := m.Metadata(); err == nil {
				last = md.Sequence.Stream
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if n == 0 || last >= want {
			return nil
		}
	}
}
