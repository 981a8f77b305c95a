package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/pkg/trace"
)

// A job's events live on subjects of its own: progress events on
// fleet.events.v2.<job>.<type>, and its one terminal event (completed, failed or
// cancelled) on fleet.events.v2.<job>.end. The terminal subject is what makes the
// event stream the judge of how a job ended: its message id is the same whatever
// the outcome ("ev:<job>:end"), so within the duplicate window the stream stores one
// terminal event per job and answers a second one as a duplicate; and the last
// message on that subject can be read in one request, long after the window.

// Subject is the subject an event is published on.
func (e Event) Subject() string {
	if e.Type.Terminal() {
		return SubjectJobEnd(e.JobID)
	}
	return subjectEvents + e.JobID + "." + string(e.Type)
}

// SubjectJobEvents matches every event of one job (for watchers and replays).
func SubjectJobEvents(jobID string) string { return subjectEvents + jobID + ".*" }

// EventJob is the job whose event a message on subject (as this connection received
// it, in the bus's namespace) is: "" for a subject that is not an event's.
func (b *Bus) EventJob(subject string) string {
	rest, ok := strings.CutPrefix(b.localSubject(subject), subjectEvents)
	if !ok {
		return ""
	}
	job, _, _ := strings.Cut(rest, ".")
	return job
}

// SubjectJobEnd is the subject of one job's terminal event.
func SubjectJobEnd(jobID string) string { return subjectEvents + jobID + ".end" }

// EmitEvent publishes a progress event without waiting for the stream (see Emit).
func (b *Bus) EmitEvent(ev Event) error { return b.Emit(ev.Subject(), ev) }

// PublishEvent publishes an event and waits for the stream to store it. For a
// terminal event it reports whether the stream already held a terminal event of the
// job (dup): the job had ended before, possibly otherwise.
func (b *Bus) PublishEvent(ctx context.Context, ev Event) (dup bool, err error) {
	m, err := Encode(b.Subject(ev.Subject()), ev)
	if err != nil {
		return false, err
	}
	trace.Inject(ctx, m.Header)
	ack, err := b.js.PublishMsg(ctx, m)
	if err != nil {
		return false, publishError(ev.Subject(), err)
	}
	return ack.Duplicate, nil
}

// TerminalEvent returns the terminal event the stream holds for a job, or nil if it
// holds none: the record of how the job ended, whatever Redis says.
func (b *Bus) TerminalEvent(ctx context.Context, jobID string) (*Event, error) {
	s, err := b.eventStream(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetLastMsgForSubject(ctx, b.Subject(SubjectJobEnd(jobID)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bus: reading the terminal event of %s: %w", jobID, err)
	}
	ev, _, err := Decode[Event](raw.Data)
	if err != nil {
		return nil, err
	}
	return &ev, nil
}

// eventStream is the EVENTS stream handle, looked up once.
func (b *Bus) eventStream(ctx context.Context) (jetstream.Stream, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.events != nil {
		return b.events, nil
	}
	s, err := b.js.Stream(ctx, b.Name(StreamEvents))
	if err != nil {
		return nil, fmt.Errorf("bus: stream %s: %w", b.Name(StreamEvents), err)
	}
	b.events = s
	return s, nil
}
