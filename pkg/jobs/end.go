package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A job ends in one place, End, whoever ends it (the chat worker's final step, a
// failed step, a direct search, a cancel, the reaper, a dead letter). Ending is two
// writes in this order:
//
//  1. Redis: a compare-and-set of the terminal status (with the answer or the error)
//     that never overwrites a terminal status;
//  2. the event stream: the job's terminal event, on a subject and with a message id
//     of its own (bus.SubjectJobEnd), so the stream keeps one terminal event per job.
//
// The terminal event is the commit point: the finish hooks (the webhook, the batch
// count) run from it, in the Finisher, a durable consumer of terminal events, so a
// crash after the event loses no webhook. The terminal event of a job with a callback
// carries a copy of the ended job's record (bus.Event.Job), so the Finisher runs its
// hooks, and its webhook is sent, even when Redis restarted empty before the event was
// handled. A crash between the two writes is repaired
// by whoever comes next (the redelivered step, the reaper): End on a job Redis says
// has ended publishes its terminal event again, a duplicate if it was out.
//
// When Redis lost an acknowledged write (a restart without fsync), Redis may say a job
// still runs that the stream says ended. The stream wins: a terminal publish the stream
// answers as a duplicate, and a reaper that finds a terminal event before ending a job,
// make Redis agree with the stream (Store.Settle) instead of ending the job twice.
//
// The job's deadline (the reaper's set) is forgotten once its terminal event is out:
// by the Finisher, which handles every terminal event and forgets the deadline in the
// round trip that reads the job (state.Store.ReadEnded), and by the reaper after an
// ending of its own. End itself does not: a crash after its event leaves the
// deadline to the Finisher, which the event reaches.

// Store is what ending a job needs of the state store (state.Store implements it).
type Store interface {
	// Finish moves a job that has not ended to status, storing fields; it reports
	// whether it did (false: the job had ended, or does not exist). A
	// state.FirstWrite field (a hop's answer) is stored only where none is:
	// another there moves nothing (state.ErrAnswerStood).
	Finish(ctx context.Context, id string, status state.Status, fields ...any) (bool, error)
	GetJob(ctx context.Context, id string) (*state.Job, error)
	// Settle makes a job's status the one the event stream recorded.
	Settle(ctx context.Context, id string, status state.Status, je *state.JobError) error
	// ForgetDeadline drops a job from the reaper's set once its ending is published.
	ForgetDeadline(ctx context.Context, id string) error
}

// Events is the durable event log (bus.Bus implements it).
type Events interface {
	PublishEvent(ctx context.Context, ev bus.Event) (dup bool, err error)
	TerminalEvent(ctx context.Context, jobID string) (*bus.Event, error)
}

// RecordFinisher is Store's Finish returning the job as the write left it when the job
// has a callback (state.Jobs implements it), for the copy its terminal event carries.
type RecordFinisher interface {
	FinishRecord(ctx context.Context, id string, status state.Status, fields ...any) (bool, *state.Ended, error)
}

// Ending is how a job ends.
type Ending struct {
	Status state.Status // Completed, Failed or Cancelled
	// Error is why a failed job failed.
	Error *state.JobError
	// Response, Usage and Trace are a completed job's answer and accounting.
	Response, Usage, Trace json.RawMessage
	// Hop is the hop the job ended on, for the event.
	Hop int
	// Turn, when set, is hop Hop's model answer, not stored yet: it is stored with
	// the ending, in the same write, unless another answer to the hop was stored
	// first (then nothing is written and End fails with state.ErrAnswerStood: the
	// step is retried from the stored answer).
	Turn json.RawMessage
}

func (e Ending) fields() []any {
	var f []any
	if e.Error != nil {
		f = append(f, "error", e.Error)
	}
	if e.Response != nil {
		f = append(f, "response", e.Response)
	}
	if e.Usage != nil {
		f = append(f, "usage", e.Usage)
	}
	if e.Trace != nil {
		f = append(f, "trace", e.Trace)
	}
	if e.Turn != nil {
		f = append(f, state.TurnField(e.Hop), state.FirstWrite(e.Turn))
	}
	return f
}

// Ender ends jobs.
type Ender struct {
	store  Store
	events Events
	// records, when the store is one, reads a job with a callback as it ends.
	records RecordFinisher
	metrics *metrics.Metrics
	log     *slog.Logger
}

// NewEnder returns an Ender over the store and the event log; m may be nil.
func NewEnder(store Store, events Events, m *metrics.Metrics, log *slog.Logger) *Ender {
	if log == nil {
		log = slog.Default()
	}
	e := &Ender{store: store, events: events, metrics: m, log: log}
	e.records, _ = store.(RecordFinisher)
	return e
}

// End ends a job, exactly once: the first ending stands, and a later one (a
// redelivery, a cancel racing an answer, the reaper) only makes sure the first one's
// terminal event is out. It returns an error when a write failed: the caller retries
// (a step is redelivered, the reaper sweeps again), and End is safe to repeat. A job
// Redis does not know is an orphan (ErrUnknownJob, a permanent error).
func (e *Ender) End(ctx context.Context, jobID string, end Ending) error {
	won, ended, err := e.finish(ctx, jobID, end)
	if err != nil {
		return err
	}
	ev := bus.Event{JobID: jobID, Type: eventOf(end.Status), At: time.Now().UTC(), Hop: end.Hop}
	setError(&ev, end.Error)
	if ended != nil {
		ev.Job = e.copyOf(ended.Job())
	}
	if !won {
		job, err := e.store.GetJob(ctx, jobID)
		if errors.Is(err, state.ErrNotFound) {
			// Nothing to end: Redis lost the job (or its record expired). The step
			// that got here is dead-lettered as an orphan.
			return Orphan(e.metrics, e.log, "end", jobID)
		}
		if err != nil {
			return err
		}
		if !job.Status.Terminal() {
			return fmt.Errorf("jobs: ending %s: status %s did not move", jobID, job.Status)
		}
		// It ended before, maybe otherwise: republish that ending's event (a duplicate
		// if the first publish got through).
		ev.Type = eventOf(job.Status)
		setError(&ev, job.Error)
		ev.Job = e.copyOf(job)
	}
	dup, err := e.events.PublishEvent(ctx, ev)
	if err != nil {
		return err
	}
	if dup && won {
		// The stream holds a terminal event although Redis let this ending win: Redis
		// lost the first ending. The stream's record stands.
		if err := e.settle(ctx, jobID, ev.Type); err != nil {
			return err
		}
		won = false
	}
	if won {
		e.log.Debug("job ended", "job", jobID, "status", end.Status)
		if e.metrics != nil {
			e.metrics.Jobs.WithLabelValues(string(end.Status)).Inc()
		}
	}
	return nil
}

// MaxEventJob bounds the copy of an ended job a terminal event carries (bus.Event.Job):
// 256 KiB, a quarter of NATS's default max_payload (1 MiB), so the event always fits.
// A job whose copy is larger (an answer of that size) is published without one: its
// finish hooks need Redis to know the job, as a job without a callback's do.
const MaxEventJob = 256 << 10

// copyOf is the copy of an ended job its terminal event carries: the record less its
// request (no hook reads it, and it is the largest part) for a job with a callback,
// whose webhook is the one finish hook with someone outside the fleet waiting for it;
// nil for another job, or one whose copy exceeds MaxEventJob.
func (e *Ender) copyOf(job *state.Job) json.RawMessage {
	if job == nil || len(job.Callback) == 0 {
		return nil
	}
	c := *job
	c.Request = nil
	b, err := json.Marshal(&c)
	if err != nil || len(b) > MaxEventJob {
		e.log.Warn("jobs: a terminal event carries no copy of its job: its webhook needs Redis to know the job", "job", job.ID, "bytes", len(b), "max", MaxEventJob, "err", err)
		return nil
	}
	return b
}

// finish is the compare-and-set of the terminal status, returning the ended job when
// it has a callback.
func (e *Ender) finish(ctx context.Context, jobID string, end Ending) (bool, *state.Ended, error) {
	if e.records == nil {
		won, err := e.store.Finish(ctx, jobID, end.Status, end.fields()...)
		return won, nil, err
	}
	return e.records.FinishRecord(ctx, jobID, end.Status, end.fields()...)
}

// Recorded reports how the event stream says a job ended, or nil. The reaper asks
// before ending a job: past the duplicate window only this lookup tells a job that
// ended (its Redis write lost) from one that never did.
func (e *Ender) Recorded(ctx context.Context, jobID string) (*bus.Event, error) {
	return e.events.TerminalEvent(ctx, jobID)
}

// Reconcile makes Redis agree with a recorded terminal event: Redis had lost how the
// job ended, and the stream's record stands.
func (e *Ender) Reconcile(ctx context.Context, rec *bus.Event) error {
	e.log.Warn("jobs: Redis had lost how a job ended; the event stream's record stands", "job", rec.JobID, "recorded", rec.Type)
	if e.metrics != nil {
		e.metrics.Reconciled.Inc()
	}
	if err := e.store.Settle(ctx, rec.JobID, statusOf(rec.Type), recordedError(rec)); err != nil {
		return err
	}
	return e.store.ForgetDeadline(ctx, rec.JobID)
}

// settle reads the recorded terminal event and makes Redis agree with it, unless it is
// the one just attempted (a replay: nothing to repair).
func (e *Ender) settle(ctx context.Context, jobID string, attempted bus.EventType) error {
	rec, err := e.events.TerminalEvent(ctx, jobID)
	if err != nil {
		return err
	}
	if rec == nil || rec.Type == attempted {
		return nil
	}
	return e.Reconcile(ctx, rec)
}

func recordedError(ev *bus.Event) *state.JobError {
	if ev.Type != bus.EventFailed {
		return nil
	}
	je := &state.JobError{}
	if json.Unmarshal(ev.Failure, je) != nil || je.Type == "" {
		return &state.JobError{Status: 500, Type: "server_error", Message: ev.Error}
	}
	return je
}

func eventOf(s state.Status) bus.EventType {
	switch s {
	case state.Completed:
		return bus.EventCompleted
	case state.Cancelled:
		return bus.EventCancelled
	}
	return bus.EventFailed
}

func statusOf(t bus.EventType) state.Status {
	switch t {
	case bus.EventCompleted:
		return state.Completed
	case bus.EventCancelled:
		return state.Cancelled
	}
	return state.Failed
}

// setError puts a failed job's error on its terminal event (nil clears it).
func setError(ev *bus.Event, je *state.JobError) {
	ev.Error, ev.Failure = "", nil
	if je != nil {
		ev.Error = je.Message
		ev.Failure, _ = json.Marshal(je)
	}
}
