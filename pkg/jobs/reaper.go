package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// ReaperStore is what the reaper needs of the state store (state.Store implements it).
type ReaperStore interface {
	LockReaper(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	Overdue(ctx context.Context, now time.Time, n int64) ([]string, error)
	JobStatus(ctx context.Context, id string) (state.Status, error)
	ForgetDeadline(ctx context.Context, id string) error
}

// Reaper is the fleet's last guarantee that an accepted job ends visibly, whatever was
// lost on the way: it sweeps the jobs whose deadline passed and whose ending is not
// published (the deadline set is dropped only once the terminal event is out).
type Reaper struct {
	store ReaperStore
	ender *Ender
	owner string
	log   *slog.Logger
	// Others, if set, is given each overdue id that names no job before the reaper
	// forgets it: a research run's id, put in the set while its cancel's step may not
	// be out (research.Worker.SweepCancel). An error keeps the id for the next sweep.
	Others func(ctx context.Context, id string) error
}

// NewReaper returns a reaper; owner names this process in the sweep lock (one sweeper
// at a time across the fleet).
func NewReaper(store ReaperStore, ender *Ender, owner string, log *slog.Logger) *Reaper {
	if log == nil {
		log = slog.Default()
	}
	return &Reaper{store: store, ender: ender, owner: owner, log: log}
}

// Run sweeps every interval until ctx ends.
func (r *Reaper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		got, err := r.store.LockReaper(ctx, r.owner, interval)
		if err != nil || !got {
			continue
		}
		r.Sweep(ctx, time.Now())
	}
}

// Sweep handles the jobs overdue at now, once each:
//   - a job Redis says has ended: its terminal event is published again (a duplicate
//     if it was out) — the ending crashed between its two writes;
//   - a job the event stream says has ended: Redis lost that write; it is put back;
//   - any other: it fails with job_deadline_exceeded.
func (r *Reaper) Sweep(ctx context.Context, now time.Time) {
	ids, err := r.store.Overdue(ctx, now, 200)
	if err != nil {
		r.log.Warn("reaper: reading deadlines", "err", err)
		return
	}
	for _, id := range ids {
		if err := r.reap(ctx, id); err != nil {
			r.log.Warn("reaper: ending a job (next sweep retries)", "job", id, "err", err)
		}
	}
}

func (r *Reaper) reap(ctx context.Context, id string) error {
	st, err := r.store.JobStatus(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		// Not a job's (Others), or gone (expired, or Redis lost it): nothing to end,
		// and no one to tell.
		if r.Others != nil {
			if err := r.Others(ctx, id); err != nil {
				return err
			}
		}
		return r.store.ForgetDeadline(ctx, id)
	}
	if err != nil {
		return err
	}
	if st.Terminal() {
		return r.end(ctx, id, Ending{Status: st})
	}
	rec, err := r.ender.Recorded(ctx, id)
	if err != nil {
		return err
	}
	if rec != nil {
		return r.ender.Reconcile(ctx, rec)
	}
	r.log.Warn("reaper: job past its deadline", "job", id, "status", st)
	return r.end(ctx, id, Ending{Status: state.Failed, Error: DeadlineExceeded()})
}

// end ends a job and, its terminal event out, forgets its deadline: the Finisher
// forgets it too when the event reaches it, but the reaper does not sweep the job
// again meanwhile.
func (r *Reaper) end(ctx context.Context, id string, e Ending) error {
	if err := r.ender.End(ctx, id, e); err != nil {
		return err
	}
	return r.store.ForgetDeadline(ctx, id)
}
