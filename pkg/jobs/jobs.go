// Package jobs is how a job enters the fleet, for every front door (the chat and job
// endpoints, batch expansion): one place that records it and publishes it in order.
package jobs

import (
	"context"
	"errors"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Recorder records new jobs (*state.Store is the Redis one).
type Recorder interface {
	// CreateJob records a new job; state.ErrExists when its id is taken.
	CreateJob(ctx context.Context, j *state.Job) error
	JobStatus(ctx context.Context, id string) (state.Status, error)
}

// Submit records a new job and publishes msg, the message that starts it, on subject
// (a bus.ChatJob on its lane, bus.SubjectJob; a direct search's
// request on its engine's subject): the queued event first on this connection, so it precedes the
// job's other events in the stream, then the job. A job already recorded (a replayed
// submission: the same Idempotency-Key, a batch line expanded again) is published
// again while it is still queued — its first publish may never have happened (the
// ingress died between the two) — and the stream drops the duplicate if it did. The
// returned publish is in flight: bus.Wait it.
func Submit(ctx context.Context, b *bus.Bus, st Recorder, job *state.Job, subject string, msg bus.Payload) (bus.Pending, error) {
	switch err := st.CreateJob(ctx, job); {
	case err == nil:
		b.EmitEvent(bus.Event{JobID: job.ID, Type: bus.EventQueued, At: job.Created})
	case errors.Is(err, state.ErrExists):
		status, err := st.JobStatus(ctx, job.ID)
		if err != nil {
			return bus.Pending{}, err
		}
		if status != state.Queued {
			return bus.Pending{}, nil // it runs, or ended: nothing to publish
		}
	default:
		return bus.Pending{}, err
	}
	return b.PublishAsync(ctx, subject, msg)
}
