// Package jobs is how a job enters the fleet, for every front door (the chat and job
// endpoints, batch expansion): one place that records it and publishes it in order.
package jobs

import (
	"context"
	"errors"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Submit records a new job and publishes it on subject (bus.SubjectChatJob or
// bus.SubjectBatchJob): the queued event first on this connection, so it precedes the
// job's other events in the stream, then the job. A job that is already recorded (a
// replayed submission with a deterministic id) is published again, not recorded twice;
// the stream drops the duplicate. The returned publish is in flight: bus.Wait it.
func Submit(ctx context.Context, b *bus.Bus, st *state.Store, job *state.Job, subject string) (bus.Pending, error) {
	switch err := st.CreateJob(ctx, job); {
	case err == nil:
		b.Emit(bus.SubjectEvents(job.ID), bus.Event{JobID: job.ID, Type: bus.EventQueued, At: job.Created})
	case !errors.Is(err, state.ErrExists):
		return bus.Pending{}, err
	}
	return b.PublishAsync(subject, bus.ChatJob{JobID: job.ID, Tenant: job.Tenant})
}
