package chat

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// HandleDeadLetter makes a dead letter visible. A dead job or resume fails its job; a
// dead search becomes an error result the model reads, so the job goes on without it.
func (w *Worker) HandleDeadLetter(ctx context.Context, d *bus.Delivery[bus.DeadLetter]) error {
	dl := d.Msg
	w.Log.Warn("dead letter", "kind", dl.MsgKind, "subject", dl.Subject, "consumer", dl.Consumer, "deliveries", dl.Deliveries, "reason", dl.Reason)
	switch dl.MsgKind {
	case bus.ChatJob{}.Kind():
		m, _, err := bus.Decode[bus.ChatJob](dl.Data)
		if err != nil {
			return nil
		}
		return w.FailJob(ctx, m.JobID, internalError(dl))
	case search.Done{}.Kind():
		m, _, err := bus.Decode[search.Done](dl.Data)
		if err != nil {
			return nil
		}
		return w.FailJob(ctx, m.JobID, internalError(dl))
	case search.Request{}.Kind():
		m, _, err := bus.Decode[search.Request](dl.Data)
		if err != nil {
			return nil
		}
		res := engines.ErrorResult(m.Engine, m.Query.Query, &engines.Error{Kind: engines.Unavailable, Engine: m.Engine,
			Message: fmt.Sprintf("the search could not be completed after %d attempts", dl.Deliveries)})
		if m.Direct {
			return w.FailJob(ctx, m.JobID, internalError(dl))
		}
		return w.Bus.Publish(ctx, bus.SubjectResume, search.Done{JobID: m.JobID, Hop: m.Hop, CallID: m.CallID, Engine: m.Engine, Result: *res, Attempts: dl.Deliveries})
	}
	if h, ok := w.DeadLetters[dl.MsgKind]; ok {
		return h(ctx, dl)
	}
	return nil
}

func internalError(dl bus.DeadLetter) *state.JobError {
	return &state.JobError{Status: http.StatusInternalServerError, Type: "server_error", Code: "dead_letter",
		Message: fmt.Sprintf("the job could not be processed (%s after %d deliveries): %s", dl.Consumer, dl.Deliveries, dl.Reason)}
}

// Reap fails jobs past their deadline, every interval until ctx ends. Every chat
// worker runs it; a short Redis lock lets one sweep at a time. It is the fleet's last
// guarantee that an accepted job ends visibly, whatever was lost on the way.
func (w *Worker) Reap(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		got, err := w.Store.LockReaper(ctx, w.ID, interval)
		if err != nil || !got {
			continue
		}
		ids, err := w.Store.Overdue(ctx, time.Now(), 200)
		if err != nil {
			w.Log.Warn("reaper: reading deadlines", "err", err)
			continue
		}
		for _, id := range ids {
			st, err := w.Store.JobStatus(ctx, id)
			if err == nil && !st.Terminal() {
				w.Log.Warn("reaper: job past its deadline", "job", id, "status", st)
				if err := w.FailJob(ctx, id, deadlineError()); err != nil {
					continue
				}
			}
			w.Store.ForgetDeadline(ctx, id)
		}
	}
}
