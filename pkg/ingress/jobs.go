package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

func viewOf(j *state.Job) jobs.View { return jobs.ViewOf(j, openaichat.AnswerJSON) }

// createJob is POST /v1/jobs: the chat request is accepted at once (202) and run by
// the fleet; its answer is fetched later, followed as events, or delivered to the
// callback ({"callback": {"url": …, "events": ["completed", "failed"]}}).
//
// An Idempotency-Key header makes a retried submission return the first one's job. The
// key is claimed only once the request is valid (a refused request burns no key), and
// it is bound to the job id and the request's hash before anything else is written, so
// a retry after a crash at any point completes the same submission: it records the job
// if the first attempt did not get that far, and publishes it again while it is queued
// (the stream drops the duplicate if the first publish got through).
func (s *Server) createJob(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "request body is not a JSON object")
		return
	}
	callback := top["callback"]
	delete(top, "callback")
	delete(top, "metadata")
	chatBody, _ := json.Marshal(top)
	req, e := s.decodeRequest(r.Context(), openaichat.Client, chatBody)
	if e != nil {
		writeWireError(w, openaichat.Client, e)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Idempotency-Key", "Idempotency-Key must be at most 255 characters")
		return
	}
	storedCallback, ok := s.callback(w, r, callback)
	if !ok {
		return
	}

	job, err := s.newJob(r, "job_", wire.OpenAIChat, req)
	if err != nil {
		writeWireError(w, openaichat.Client, wire.Invalid("", "The request cannot be run: %s", err))
		return
	}
	job.Band = bandFor(r, bus.BandAsync)
	tenant := tenantOf(r)
	if _, ok := s.admit(w, r, chatCodec, job, holdNone); !ok {
		return
	}
	// The job slot admitChat took is freed unless a new job is accepted under it (a
	// replay is admitted like a new request, so at the cap it is refused too).
	slot := job.ID
	defer func() {
		if slot != "" {
			s.JobFinished(context.WithoutCancel(r.Context()), &state.Job{ID: slot, Tenant: tenant})
		}
	}()
	replayed := false
	if sk, hash, ok := shareKey(r, chatBody); ok && key == "" && storedCallback == nil {
		job.FreshID = false
		won, existing, err := s.claimShared(r.Context(), tenant, sk, job.ID, hash)
		if err != nil {
			s.logFailure(r.Context(), "api: claiming a shared job", "err", err)
			writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Could not look for an identical job; try again.")
			return
		}
		if !won {
			job.ID, replayed = existing, true
			w.Header().Set(HeaderShared, "true")
		}
	}
	if key != "" {
		// The key names the job from now on: a retry under it, or a request racing
		// this one, may record it too, so CreateJob checks for it.
		job.FreshID = false
		hash := requestHash(body)
		won, existing, existingHash, err := s.Store.Jobs.ClaimIdempotency(r.Context(), tenant, key, job.ID, hash, s.Store.Jobs.RecordRetention())
		if err != nil {
			s.logFailure(r.Context(), "api: claiming an Idempotency-Key", "err", err)
			writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Could not record the Idempotency-Key; try again.")
			return
		}
		if !won {
			if existingHash != hash {
				writeError(w, http.StatusConflict, "invalid_request_error", "idempotency_key_reused", "Idempotency-Key",
					"This Idempotency-Key was used with a different request body.")
				return
			}
			job.ID, replayed = existing, true // it holds its own slot
		}
	}

	secret := ""
	if storedCallback != nil {
		// The secret is stored before the job is: a job record never lacks it.
		sec, err := s.Webhooks.Secret(r.Context(), tenant, job.ID)
		if err != nil {
			s.logFailure(r.Context(), "api: recording the callback's secret", "job", job.ID, "err", err)
			writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Could not record the callback; try again.")
			return
		}
		job.Callback, secret = storedCallback, sec
	}
	if !s.submit(r.Context(), w, job, jobSubject(job), chatJob(job), key != "") {
		return
	}
	if replayed {
		stored, err := s.Store.Jobs.GetJob(r.Context(), job.ID)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading the job failed; try again.")
			return
		}
		job = stored
		if key != "" {
			w.Header().Set("Idempotent-Replayed", "true")
		}
	} else {
		slot = "" // accepted: the job holds it
	}
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	view := viewOf(job)
	// The job's own signing secret: not part of the job record, shown to the client
	// that submitted it (again on a replay, for a client whose first answer was lost).
	view.WebhookSecret = secret
	writeJSON(w, http.StatusAccepted, view)
}

// callback validates a request's callback (nil: none was given); it has answered
// when it returns false.
func (s *Server) callback(w http.ResponseWriter, r *http.Request, callback json.RawMessage) (json.RawMessage, bool) {
	if len(callback) == 0 || string(callback) == "null" {
		return nil, true
	}
	if s.Webhooks == nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "callback", "callbacks are not enabled on this server")
		return nil, false
	}
	cb, err := s.Webhooks.ValidateCallback(r.Context(), callback)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_callback", "callback", err.Error())
		return nil, false
	}
	return cb, true
}

// loadJob reads the job named in the path, as its tenant sees it; it has answered
// when it returns nil.
func (s *Server) loadJob(w http.ResponseWriter, r *http.Request) *state.Job {
	id := r.PathValue("id")
	var job *state.Job
	err := state.ErrNotFound
	if validJobID(id) {
		job, err = s.Store.Jobs.GetJob(r.Context(), id)
	}
	if errors.Is(err, state.ErrNotFound) || err == nil && job.Tenant != tenantOf(r) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "job_not_found", "id", fmt.Sprintf("No job %q.", redact.Clip(id, 64)))
		return nil
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading the job failed.")
		return nil
	}
	return job
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, job *state.Job) {
	setCost(w.Header(), recordedSpend(job))
	writeJSON(w, http.StatusOK, viewOf(job))
}

// cancelJob is POST /v1/jobs/{id}/cancel: the job stops at its next step and makes no
// further paid calls.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, job *state.Job) {
	ended := job.Status.Terminal()
	if !ended {
		if err := s.Ender.End(r.Context(), job.ID, jobs.Ending{Status: state.Cancelled}); err != nil {
			s.Log.Warn("api: cancelling", "job", job.ID, "err", err)
			writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Cancelling failed; try again.")
			return
		}
		var err error
		if job, err = s.Store.Jobs.GetJob(r.Context(), job.ID); err != nil {
			writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading the job failed.")
			return
		}
	}
	if ended || job.Status != state.Cancelled {
		writeError(w, http.StatusConflict, "invalid_request_error", "job_finished", "", fmt.Sprintf("The job has already ended (%s).", job.Status))
		return
	}
	writeJSON(w, http.StatusOK, viewOf(job))
}

// jobEvents is GET /v1/jobs/{id}/events: the job's lifecycle events as server-sent
// events, replayed from the start of the durable event stream, then live, ending with
// the terminal event. With ?deltas=1 the job's live stream is interleaved as it
// arrives: each piece of model text as an "event: delta" (a bus.StreamMsg: hop,
// attempt, character offset, text). Deltas are ephemeral: only those published while
// the request is open are shown, and only a job whose client streams has any.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, job *state.Job) {
	ctx, done, ok := s.openStream(w, r, chatCodec, job.Tenant)
	if !ok {
		return
	}
	defer done()
	var deltas chan *nats.Msg
	if v := r.URL.Query().Get("deltas"); v == "1" || v == "true" {
		deltas = make(chan *nats.Msg, 4096)
		sub, err := s.Bus.ChanSubscribe(bus.SubjectStream(job.ID), deltas)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "The event stream is unavailable.")
			return
		}
		defer sub.Unsubscribe()
	}
	it, stop, err := s.followEvents(ctx, job.ID)
	if err != nil {
		s.Log.Warn("api: opening a job's event stream", "job", job.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "The event stream is unavailable.")
		return
	}
	defer stop()
	// The durable events are read on a goroutine of their own, so live deltas are
	// written while it waits; only this goroutine writes the response.
	type next struct {
		msg jetstream.Msg
		err error
	}
	events := make(chan next)
	go func() {
		for {
			fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			msg, err := it.Next(jetstream.NextContext(fctx))
			cancel()
			select {
			case events <- next{msg, err}:
			case <-ctx.Done():
				return
			}
			if ctx.Err() != nil || err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
				return
			}
		}
	}()
	rc := startSSE(w)
	rc.Flush()
	// Deltas are live: they wait in their subscription until the replay of the
	// durable events has caught up (an event with none pending after it, or nothing to
	// read), so none is written before the lifecycle events that came before it.
	var live chan *nats.Msg
	for {
		var n next
		select {
		case <-ctx.Done():
			return
		case m := <-live:
			d, _, derr := bus.Decode[bus.StreamMsg](m.Data)
			if derr != nil || d.Type != bus.StreamDelta {
				continue
			}
			b, _ := json.Marshal(d)
			fmt.Fprintf(w, "event: delta\ndata: %s\n\n", b)
			rc.Flush()
			continue
		case n = <-events:
		}
		msg, err := n.msg, n.err
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
				s.Log.Warn("api: reading a job's events", "job", job.ID, "err", err)
				return
			}
			// Nothing new: keep the connection alive, and stop if the job ended
			// without a terminal event we could see (expired from the stream).
			live = deltas
			fmt.Fprint(w, ": keep-alive\n\n")
			rc.Flush()
			if st, err := s.Store.Jobs.JobStatus(ctx, job.ID); err == nil && st.Terminal() && time.Since(job.Created) > 24*time.Hour {
				return
			}
			continue
		}
		ev, _, derr := bus.Decode[bus.Event](msg.Data())
		if derr != nil {
			continue
		}
		meta, _ := msg.Metadata()
		ev.Job = nil // the finisher's copy of the job, not the client's to read
		b, _ := json.Marshal(ev)
		if meta != nil {
			fmt.Fprintf(w, "id: %d\n", meta.Sequence.Stream)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, b)
		rc.Flush()
		if ev.Type.Terminal() {
			return
		}
		if meta == nil || meta.NumPending == 0 {
			live = deltas // caught up
		}
	}
}

// eventsInactive is how long the server keeps an /events consumer nobody pulls from:
// the backstop for one whose deletion failed (the ingress died mid-stream).
const eventsInactive = 10 * time.Second

// followEvents reads a job's events from the start of the durable event stream
// through an ordered consumer. stop ends the reading and deletes the consumer on the
// server, so a finished or abandoned stream leaves nothing behind.
//
// The consumer's name is chosen here, not by the library, so that a creation whose
// answer was lost (a JetStream API timeout on a loaded server: the consumer may exist
// all the same) is retried under the same name, which the server takes as the same
// consumer, and deleted if the stream gives up.
func (s *Server) followEvents(ctx context.Context, jobID string) (jetstream.MessagesContext, func(), error) {
	prefix := nuid.Next()
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{bus.SubjectJobEvents(jobID)},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: eventsInactive,
		NamePrefix:        prefix,
	}
	// A consumer left behind is deleted by the server once nobody pulls from it
	// (eventsInactive), so deleting it here only frees it sooner: a stream that cannot
	// get a turn for the call soon gives up rather than hold its handler.
	deleteConsumer := func(name string) {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventsDeleteWait)
		release, err := s.eventsCall(gctx)
		cancel()
		if err != nil {
			s.Log.Debug("api: left an events consumer to expire", "consumer", name)
			return
		}
		defer release()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventsCallTimeout)
		defer cancel()
		if err := s.Bus.DeleteConsumer(dctx, bus.StreamEvents, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			s.Log.Warn("api: deleting an events consumer (it expires on its own)", "consumer", name, "err", err)
		}
	}
	var cons jetstream.Consumer
	var it jetstream.MessagesContext
	err := backoff.Retry(func() error {
		if cons == nil {
			release, err := s.eventsCall(ctx)
			if err != nil {
				return backoff.Permanent(err)
			}
			actx, cancel := context.WithTimeout(ctx, eventsCallTimeout)
			cons, err = s.Bus.OrderedConsumer(actx, bus.StreamEvents, cfg)
			cancel()
			release()
			if err != nil {
				cons = nil
				return transientEvents(ctx, err)
			}
		}
		var err error
		it, err = cons.Messages()
		return transientEvents(ctx, err)
	}, backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxElapsedTime(followEventsPatience)), ctx))
	if err != nil {
		// The first consumer's name is <prefix>_1 (the library numbers them from 1).
		deleteConsumer(prefix + "_1")
		return nil, nil, err
	}
	stop := func() {
		it.Stop()
		if info := cons.CachedInfo(); info != nil {
			deleteConsumer(info.Name)
		}
	}
	return it, stop, nil
}

// followEventsPatience bounds how long opening an event stream retries JetStream;
// eventsCallTimeout bounds one JetStream API call of a stream, once it has its turn.
const (
	followEventsPatience = 30 * time.Second
	eventsCallTimeout    = 10 * time.Second
	eventsDeleteWait     = 2 * time.Second
	// eventsCallsAtOnce is how many of those calls one ingress makes at once.
	eventsCallsAtOnce = 16
)

// eventsCall waits for a turn to make a JetStream API call for an event stream; the
// caller releases it when the call returns.
func (s *Server) eventsCall(ctx context.Context) (release func(), err error) {
	select {
	case s.eventsGate <- struct{}{}:
		return func() { <-s.eventsGate }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// transientEvents marks an error of opening an event stream as worth retrying: a
// timeout while the request is still wanted; anything else is permanent.
func transientEvents(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)) {
		return err
	}
	return backoff.Permanent(err)
}
