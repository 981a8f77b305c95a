package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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
// and a process that dies after a job's ending loses none of its hooks.
type Finisher struct {
	store   Store
	ender   *Ender
	hooks   []Hook
	metrics *metrics.Metrics
	log     *slog.Logger
}

// NewFinisher returns a Finisher running hooks in order.
func NewFinisher(store Store, ender *Ender, m *metrics.Metrics, log *slog.Logger, hooks ...Hook) *Finisher {
	if log == nil {
		log = slog.Default()
	}
	return &Finisher{store: store, ender: ender, hooks: hooks, metrics: m, log: log}
}

// EndedReader is what a Store may do besides GetJob: read an ended job with the whole
// of its hash, which a finish hook may use without reading the job again
// (state.Store.ReadEnded, state.Store.ArchiveEnded), and forget its deadline in the
// same round trip.
type EndedReader interface {
	ReadEnded(ctx context.Context, id string) (*state.Job, error)
}

// read reads an ended job for its hooks and forgets its deadline: the job's terminal
// event is out (it is the one being handled), so the reaper has nothing left to do
// for it. An EndedReader does both in one round trip.
func (f *Finisher) read(ctx context.Context, id string) (*state.Job, error) {
	if r, ok := f.store.(EndedReader); ok {
		return r.ReadEnded(ctx, id)
	}
	job, err := f.store.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	return job, f.store.ForgetDeadline(ctx, id)
}

// Handle runs the hooks of the job a terminal event ended.
func (f *Finisher) Handle(ctx context.Context, d *bus.Delivery[bus.Event]) error {
	ev := d.Msg
	if !ev.Type.Terminal() {
		return nil
	}
	job, err := f.read(ctx, ev.JobID)
	if errors.Is(err, state.ErrNotFound) {
		// Redis lost the record (or it expired): there is no callback or batch to
		// tell. Say so loudly; nothing else can be done for it.
		f.log.Error("jobs: terminal event of a job Redis does not know", "job", ev.JobID, "event", ev.Type)
		if f.metrics != nil {
			f.metrics.Orphans.WithLabelValues(bus.ConsumerFinisher).Inc()
		}
		return nil
	}
	if err != nil {
		return err
	}
	if job.Status != statusOf(ev.Type) {
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
		if job, err = f.read(ctx, ev.JobID); err != nil {
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
