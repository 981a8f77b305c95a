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
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// Hook is told of every job that ended (the webhook service queues the callback, the
// batch service counts the line). It must be idempotent: a terminal event can be
// handled more than once.
type Hook interface {
	JobFinished(ctx context.Context, job *state.Job) error
}

// Finisher runs the finish hooks of every job from its terminal event: a durable
// consumer of bus.SubjectEndsAll, so a hook that fails is retried with the message,
// and a process that dies after a job's ending loses none of its hooks. A job Redis
// does not know (it restarted empty) is counted as an orphan; its hooks run from the
// event's copy of the job when the event carries one (bus.Event.Job: a job with a
// callback), and the hooks' own guards keep each to once (a webhook's delivery id).
type Finisher struct {
	store   EndedStore
	ender   *Ender
	hooks   []Hook
	metrics *metrics.Metrics
	log     *slog.Logger
}

// NewFinisher returns a Finisher running hooks in order.
func NewFinisher(store EndedStore, ender *Ender, m *metrics.Metrics, log *slog.Logger, hooks ...Hook) *Finisher {
	if log == nil {
		log = slog.Default()
	}
	return &Finisher{store: store, ender: ender, hooks: hooks, metrics: m, log: log}
}

// EndedStore is what the Finisher needs of the state store (state.Jobs implements it).
type EndedStore interface {
	// ReadEnded reads an ended job for its hooks, with the whole of its hash (which a
	// finish hook may use without reading the job again: state.Jobs.ArchiveEnded),
	// and forgets its deadline in the same round trip: the job's terminal event is out
	// (it is the one being handled), so the reaper has nothing left to do for it.
	ReadEnded(ctx context.Context, id string) (*state.Job, error)
	// RestoreDeadline puts a job back in the reaper's set, due at at: the Finisher
	// forgot the deadline of a job whose ending Redis turned out to have lost.
	RestoreDeadline(ctx context.Context, id string, at time.Time) error
}

// Handle runs the hooks of the job a terminal event ended.
func (f *Finisher) Handle(ctx context.Context, d *bus.Delivery[bus.Event]) error {
	ev := d.Msg
	if !ev.Type.Terminal() {
		return nil
	}
	job, err := f.store.ReadEnded(ctx, ev.JobID)
	lost := errors.Is(err, state.ErrNotFound)
	if lost {
		// Redis lost the record (or it expired). The event's copy of the job, which a
		// job with a callback carries, still tells its hooks whom to tell; without
		// one there is nothing to tell. Either way, say so loudly.
		if f.metrics != nil {
			f.metrics.Orphans.WithLabelValues(bus.ConsumerFinisher).Inc()
		}
		if job = copied(&ev); job == nil {
			f.log.Error("jobs: terminal event of a job Redis does not know", "job", ev.JobID, "event", ev.Type)
			return nil
		}
		f.log.Error("jobs: terminal event of a job Redis does not know: its hooks run from the event's copy of the job", "job", ev.JobID, "event", ev.Type)
		err = nil
	}
	if err != nil {
		return err
	}
	if !lost && job.Status != statusOf(ev.Type) {
		// The stream's record stands over a Redis that lost the ending. Until Redis
		// agrees, the job keeps the deadline the read forgot (Reconcile forgets it
		// again), so the reaper repairs the job if this handler cannot.
		if !job.Deadline.IsZero() {
			if err := f.store.RestoreDeadline(ctx, job.ID, job.Deadline); err != nil {
				return err
			}
		}
		if err := f.ender.Reconcile(ctx, &ev); err != nil {
			return err
		}
		if job, err = f.store.ReadEnded(ctx, ev.JobID); err != nil {
			return err
		}
	}
	if d.Attempt <= 1 && f.metrics != nil && !job.Finished.IsZero() {
		trace.Observe(ctx, f.metrics.JobSeconds, job.Finished.Sub(job.Created).Seconds())
	}
	hctx, span := trace.Internal(ctx, "finish hooks", trace.JobID.String(job.ID))
	var errs []error
	for _, h := range f.hooks {
		if err := h.JobFinished(hctx, job); err != nil {
			errs = append(errs, err)
		}
	}
	err = errors.Join(errs...)
	trace.End(span, err)
	if err != nil {
		return fmt.Errorf("jobs: finish hooks of %s: %w", job.ID, err)
	}
	return nil
}

// copied is the copy of the ended job a terminal event carries (bus.Event.Job), with
// the event's outcome, or nil when it carries none (or none that decodes).
func copied(ev *bus.Event) *state.Job {
	if len(ev.Job) == 0 {
		return nil
	}
	job := &state.Job{}
	if json.Unmarshal(ev.Job, job) != nil || job.ID != ev.JobID {
		return nil
	}
	job.Status = statusOf(ev.Type)
	if job.Error == nil {
		job.Error = recordedError(ev)
	}
	return job
}
