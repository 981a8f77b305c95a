package chat

import (
	"context"
	"fmt"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/search"
)

// HandleDeadLetter makes a dead letter visible. A dead job or resume fails its job; a
// dead search becomes an error result the model reads, so the job goes on without it.
func (w *Worker) HandleDeadLetter(ctx context.Context, d *bus.Delivery[bus.DeadLetter]) error {
	dl := d.Msg
	w.Log.Warn("dead letter", "kind", dl.MsgKind, "subject", dl.Subject, "consumer", dl.Consumer, "deliveries", dl.Deliveries, "reason", dl.Reason)
	if strings.Contains(dl.Reason, jobs.ErrUnknownJob.Error()) {
		return nil // an orphan: no job to fail or resume (counted where it was refused)
	}
	switch dl.MsgKind {
	case bus.ChatJob{}.Kind():
		m, _, err := bus.Decode[bus.ChatJob](dl.Data)
		if err != nil {
			return nil
		}
		return w.FailJob(ctx, m.JobID, jobs.DeadLettered(dl.Consumer, dl.Deliveries, dl.Reason))
	case search.Done{}.Kind():
		m, _, err := bus.Decode[search.Done](dl.Data)
		if err != nil {
			return nil
		}
		return w.FailJob(ctx, m.JobID, jobs.DeadLettered(dl.Consumer, dl.Deliveries, dl.Reason))
	case search.Request{}.Kind():
		m, _, err := bus.Decode[search.Request](dl.Data)
		if err != nil {
			return nil
		}
		res := engines.ErrorResult(m.Engine, m.Query.Query, &engines.Error{Kind: engines.Unavailable, Engine: m.Engine,
			Message: fmt.Sprintf("the search could not be completed after %d attempts", dl.Deliveries)})
		if m.Direct {
			return w.FailJob(ctx, m.JobID, jobs.DeadLettered(dl.Consumer, dl.Deliveries, dl.Reason))
		}
		return w.Bus.Publish(ctx, bus.SubjectResumeOf(m.Band, m.Tenant), search.Done{JobID: m.JobID, Hop: m.Hop, CallID: m.CallID, Engine: m.Engine, Result: *res, Attempts: dl.Deliveries})
	case search.FetchRequest{}.Kind():
		// A fetch that kept failing: the model reads that the page was unavailable.
		m, _, err := bus.Decode[search.FetchRequest](dl.Data)
		if err != nil {
			return nil
		}
		p := &fetch.Page{URL: m.URL, Error: &fetch.Error{Type: fetch.ErrUnavailable, Message: fmt.Sprintf("the page could not be fetched after %d attempts", dl.Deliveries)}}
		return w.Bus.Publish(ctx, bus.SubjectResumeOf(m.Band, m.Tenant), search.Done{JobID: m.JobID, Hop: m.Hop, CallID: m.CallID, Engine: search.FetchEngine, Result: *search.PageResult(p), Attempts: dl.Deliveries, Page: p})
	}
	return nil
}
