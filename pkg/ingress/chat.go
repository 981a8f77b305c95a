package ingress

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// newJob is the job of a request a client sent in protocol p, decoded: every create
// path's. Its request is stored as decoded (wire.Stored), never re-encoded in another
// protocol, and its question is kept for listings.
func (s *Server) newJob(r *http.Request, idPrefix string, p wire.Protocol, req *wire.Request) (*state.Job, error) {
	stored, err := wire.EncodeStored(p, req)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	band := bus.BandSync
	if req.Background {
		band = bus.BandAsync
	}
	return &state.Job{ID: state.NewID(idPrefix), FreshID: true, Tenant: tenantOf(r), Kind: "chat", Model: req.Model, Request: stored,
		Question: redact.Clip(wire.LatestUserText(req.Messages), questionChars), Created: now, Deadline: now.Add(s.JobTimeout),
		Band: bandFor(r, band), TraceID: trace.ID(r.Context())}, nil
}

// bandFor is the priority band of a request whose kind gives it band: lower when its
// X-Searchfleet-Priority header asks for a lower one, never higher (an unknown value
// is ignored).
func bandFor(r *http.Request, band string) string {
	b, _ := bus.LowerBand(band, r.Header.Get(bus.HeaderPriority))
	return b
}

// jobSubject is the lane a new chat job is published on.
func jobSubject(job *state.Job) string { return bus.SubjectJob(job.Band, job.Tenant, "") }

// submit records a job and publishes it (enqueue), answering the request in the
// OpenAI error shape when that fails; it has answered when it returns false.
func (s *Server) submit(ctx context.Context, w http.ResponseWriter, job *state.Job, subject string, msg bus.Payload, keyed bool) bool {
	e := s.enqueue(ctx, job, subject, msg, keyed)
	if e != nil {
		w.Header().Set("Retry-After", "1")
		writeAPIError(w, e)
	}
	return e == nil
}

// enqueue records a job and publishes msg (jobs.Submit), waiting until the stream has
// it. It returns nil when the job is accepted, else what to tell the client (503). When
// the publish fails the job was not accepted: a job an Idempotency-Key can complete
// (keyed) stays recorded for the client's retry to publish; any other is deleted, so
// nothing is left that no one will run.
func (s *Server) enqueue(ctx context.Context, job *state.Job, subject string, msg bus.Payload, keyed bool) *wire.Error {
	if job.Question == "" {
		// Kept with the job's small fields, for listings: its request leaves Redis
		// when it ends.
		job.Question = redact.Clip(questionOf(job.Request), questionChars)
	}
	p, err := jobs.Submit(ctx, s.Bus, s.Store.Jobs, job, subject, msg)
	if err == nil {
		err = bus.Wait(ctx, p)
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		// The client hung up: not a server error.
		s.Log.Info("api: client left during submission", "job", job.ID)
	} else {
		s.Log.Error("api: publishing job", "job", job.ID, "err", err)
	}
	text := "The fleet could not take the job; try again."
	if keyed {
		text = "The fleet could not take the job; retry with the same Idempotency-Key."
	}
	if errors.Is(err, bus.ErrQueueFull) {
		text = "The fleet's queue is full; retry later."
	}
	if !keyed {
		s.JobFinished(context.WithoutCancel(ctx), job) // its tenant's job slot
		if err := s.Store.Jobs.DeleteJob(context.WithoutCancel(ctx), job.ID); err != nil {
			s.Log.Warn("api: dropping an unaccepted job (the reaper will end it)", "job", job.ID, "err", err)
		}
	}
	return &wire.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: text}
}

// chatJob is the message that starts a chat job.
func chatJob(job *state.Job) bus.ChatJob { return bus.ChatJob{JobID: job.ID, Tenant: job.Tenant} }

// waiter watches one job's events (Server.events). It is registered before the job
// is published, so the terminal event cannot be missed; a Redis poll backs it up
// across NATS reconnects.
type waiter struct {
	ch    chan *nats.Msg
	leave func() // unregisters it from the job's events
	// live is the job's live-stream subscription (watchLive) and on what receives its
	// messages during wait.
	live *nats.Subscription
	on   func(*nats.Msg)
}

func (s *Server) watch(jobID string) (*waiter, error) { return s.watchWith(jobID, 32) }

// watchWith is a waiter of jobID whose channel holds size messages.
func (s *Server) watchWith(jobID string, size int) (*waiter, error) {
	wt := &waiter{ch: make(chan *nats.Msg, size)}
	leave, err := s.events.add(s.Bus, jobID, wt)
	if err != nil {
		return nil, err
	}
	wt.leave = leave
	return wt, nil
}

func (wt *waiter) stop() {
	wt.leave()
	if wt.live != nil {
		wt.live.Unsubscribe()
	}
}

var errWaitTimeout = errors.New("still running")

// wait returns the job once it has ended. tick, if set, runs whenever the wait wakes
// (an event, or the 2 s poll): a streaming answer sends its keep-alives from it.
func (wt *waiter) wait(ctx context.Context, s *Server, jobID string, max time.Duration, tick func()) (*state.Job, error) {
	timeout := time.NewTimer(max)
	defer timeout.Stop()
	poll := time.NewTicker(2 * time.Second)
	defer poll.Stop()
	if tick == nil {
		tick = func() {}
	}
	for {
		select {
		case m := <-wt.ch:
			if streamLive(m) {
				if wt.on != nil {
					wt.on(m)
				}
				continue
			}
			tick()
			if !bus.EventType(m.Header.Get(bus.HeaderEvent)).Terminal() {
				continue
			}
		case <-poll.C:
			tick()
			st, err := s.Store.Jobs.JobStatus(ctx, jobID)
			if err != nil || !st.Terminal() {
				continue
			}
		case <-timeout.C:
			return nil, errWaitTimeout
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, errWaitTimeout // a stream's longest duration
			}
			return nil, ctx.Err()
		}
		return s.Store.Jobs.GetJob(ctx, jobID)
	}
}

// writeOutcome answers a direct job that has ended with its answer, or its failure
// in the OpenAI shape.
func (s *Server) writeOutcome(w http.ResponseWriter, job *state.Job) {
	switch job.Status {
	case state.Completed:
		b, err := openaichat.AnswerJSON(job.Response)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "", "", "The job's answer is unreadable.")
			return
		}
		setCost(w.Header(), recordedSpend(job))
		writeJSON(w, http.StatusOK, b)
	case state.Cancelled:
		writeAPIError(w, jobCancelled())
	default:
		writeAPIError(w, jobFailure(job.Error))
	}
}

// jobFailure is the error a failed job's client is shown (a status below 400 is
// shown as 500).
func jobFailure(je *state.JobError) *wire.Error {
	if je == nil {
		je = &state.JobError{Status: http.StatusInternalServerError, Type: "server_error", Message: "the job failed"}
	}
	status := je.Status
	if status < 400 {
		status = http.StatusInternalServerError
	}
	return &wire.Error{Status: status, Type: je.Type, Code: je.Code, Message: je.Message}
}

// jobCancelled is the error a cancelled job's client is shown.
func jobCancelled() *wire.Error {
	return &wire.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "job_cancelled", Message: "The job was cancelled."}
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	data := make([]map[string]any, 0, len(s.Models))
	for _, m := range s.Models {
		data = append(data, map[string]any{"id": m, "object": "model", "created": 0, "owned_by": "searchfleet"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}
