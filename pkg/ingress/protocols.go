package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The client protocols (POST /v1/chat/completions, /v1/responses, /v1/messages) share
// one create path: the request is decoded by the protocol's codec into the canonical
// form and stored so (wire.Stored), with the protocol it came in. When the job ends,
// its answer (stored in canonical form too, wire.EncodeAnswer) and its search trace
// are encoded in the client's protocol.

func writeWireError(w http.ResponseWriter, codec errorEncoder, e *wire.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(codec.EncodeError(e))
}

// answerID is the id of job id's answer in codec's protocol (Chat's "chatcmpl-" form).
func answerID(codec wire.ClientCodec, id string) string {
	if codec.Protocol() == wire.OpenAIChat {
		return "chatcmpl-" + id
	}
	return id
}

// writeResponse answers with resp in codec's protocol, its cost in the headers.
func writeResponse(w http.ResponseWriter, codec wire.ClientCodec, resp *wire.Response) {
	b, err := codec.EncodeResponse(resp)
	if err != nil {
		writeWireError(w, codec, wire.AsError(err))
		return
	}
	setCost(w.Header(), resp.Usage.Spend)
	writeJSON(w, http.StatusOK, json.RawMessage(b))
}

// protocolRequest serves a client protocol's create endpoint. Job ids (and so the
// answers' ids) start with idPrefix.
func (s *Server) protocolRequest(codec wire.ClientCodec, idPrefix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fail := func(e *wire.Error) { writeWireError(w, codec, e) }
		body, e := s.boundedBody(w, r)
		if e != nil {
			fail(e)
			return
		}
		var rr *responsesRequest
		if codec.Protocol() == wire.OpenAIResponses && s.researchResponse(w, r, body) {
			return // a research model's request starts a research run (research_responses.go)
		}
		if codec.Protocol() == wire.OpenAIResponses {
			if rr, e = s.resolveResponses(r.Context(), tenantOf(r), body); e != nil {
				fail(e)
				return
			}
			body = rr.body
		}
		req, e := s.decodeRequest(r.Context(), codec, body)
		if e != nil {
			fail(e)
			return
		}
		job, err := s.newJob(r, idPrefix, codec.Protocol(), req)
		if err != nil {
			fail(wire.Invalid("", "The request cannot be run: %s", err))
			return
		}
		job.Unstored = rr != nil && !rr.store // answered here, never in the background
		stream := codec.NewStream()
		if codec.Protocol() == wire.OpenAIChat {
			stream = openaichat.NewStream(includeUsage(req))
		}
		base := &wire.Response{ID: answerID(codec, job.ID), JobID: job.ID, Model: job.Model, Created: job.Created, Status: wire.StatusQueued, Notes: req.AllNotes()}
		if rr != nil {
			base.Echo = rr.echo
		}
		answer := func(done *state.Job) (*wire.Response, *wire.Error) {
			resp, e := answerOf(done, req, codec.Protocol())
			resp.ID, resp.Echo = base.ID, base.Echo
			resp.SealReasoning(req, s.Reasoning, done.Tenant)
			if rr != nil && e == nil {
				// Before the client has the answer, so its next turn finds this one.
				s.addTurn(context.WithoutCancel(r.Context()), done, rr.saved)
			}
			if job.Unstored {
				s.forgetAnswer(context.WithoutCancel(r.Context()), done)
			}
			return resp, e
		}
		release, ok := s.admit(w, r, codec, job, holdOf(req))
		if !ok {
			return
		}
		defer release()
		shared := false
		if sk, hash, ok := shareKey(r, append([]byte(codec.Protocol()+"\n"), body...)); ok && rr == nil && !req.Stream && !req.Background {
			// A plain answer of an identical request in flight is that request's (share.go);
			// streams and Responses chains have an answer of their own.
			won, existing, err := s.claimShared(r.Context(), tenantOf(r), sk, job.ID, hash)
			if err != nil {
				s.logFailure(r.Context(), "api: claiming a shared job", "err", err)
				fail(&wire.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "Could not look for an identical request; try again."})
				return
			}
			if !won {
				job.ID, shared = existing, true
				base.ID = answerID(codec, job.ID)
				w.Header().Set(HeaderShared, "true")
			}
		}
		watch := s.watch
		if req.Stream {
			watch = s.watchLive
		}
		waiter, err := watch(job.ID)
		if err != nil {
			s.Log.Warn("api: watching a job's events", "job", job.ID, "err", err) // the details name NATS's address
			w.Header().Set("Retry-After", "1")
			fail(&wire.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "The fleet is unavailable; retry shortly."})
			return
		}
		defer waiter.stop()
		if !shared {
			// Stored before the job is submitted: a job that ends at once is archived with
			// its stored response (state.Store.ArchiveJob).
			s.saveResponse(r.Context(), job, rr)
			if e := s.enqueue(r.Context(), job, jobSubject(job), chatJob(job), false); e != nil {
				w.Header().Set("Retry-After", "1")
				fail(e)
				return
			}
		}
		w.Header().Set("X-Searchfleet-Job-Id", job.ID)
		for _, n := range base.Notes {
			w.Header().Add("X-Searchfleet-Warning", n)
		}
		switch {
		case req.Background:
			b, _ := codec.EncodeResponse(base)
			writeJSON(w, http.StatusOK, json.RawMessage(b))
		case req.Stream:
			s.relayStream(w, r, stream, base, waiter, answer, func(live *wire.Response) { live.ShowTo(req, codec.Protocol()) })
		default:
			done, err := waiter.wait(r.Context(), s, job.ID, s.SyncWait, nil)
			if err != nil {
				if e := s.waitError(job.ID, err); e != nil {
					fail(e)
				}
				return
			}
			resp, e := answer(done)
			if e != nil {
				fail(e)
				return
			}
			writeResponse(w, codec, resp)
		}
	}
}

// decodeRequest reads a create request of codec's protocol into canonical form and
// checks what every create path checks: a Chat request's parameters, a known model,
// search settings the fleet can serve, files the model can read (those given by URL
// read within ctx where the model needs them read). The request's notes name the
// settings the fleet cannot honour.
func (s *Server) decodeRequest(ctx context.Context, codec wire.ClientCodec, body []byte) (*wire.Request, *wire.Error) {
	var req *wire.Request
	var err error
	if codec.Protocol() == wire.OpenAIChat {
		req, err = openaichat.DecodeRequest(body, s.ChatBillableParams)
	} else {
		req, err = codec.DecodeRequest(body)
	}
	if err != nil {
		return nil, wire.AsError(err)
	}
	if e := req.OpenReasoning(s.Reasoning, tenantIn(ctx)); e != nil {
		return nil, e
	}
	if e := s.knownModel(req.Model); e != nil {
		return nil, e
	}
	req.Notes = append(req.Notes, s.reasoningNotes(codec.Protocol(), req.Reasoning, req.Model)...)
	if e := s.checkSearch(req); e != nil {
		return nil, e
	}
	return s.modelFiles(ctx, req)
}

// knownModel refuses a model the fleet does not serve (404 model_not_found).
func (s *Server) knownModel(model string) *wire.Error {
	if slices.Contains(s.Models, model) {
		return nil
	}
	return &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model %q does not exist. Available models: %s.", redact.Clip(model, 64), strings.Join(s.Models, ", "))}
}

// includeUsage reports whether a streamed Chat request asked for a final usage chunk
// (stream_options.include_usage).
func includeUsage(req *wire.Request) bool {
	var opts struct {
		IncludeUsage bool `json:"include_usage"`
	}
	raw := req.Params["stream_options"]
	return len(raw) > 0 && json.Unmarshal(raw, &opts) == nil && opts.IncludeUsage
}

// ModelTarget is the protocol and the provider's model name that serve a client model
// name.
type ModelTarget struct {
	Protocol wire.Protocol
	Model    string
	// API is the model protocol the fleet calls the model with, which says what files
	// it takes (nil: files are not checked at submission).
	API wire.ModelAPI
}

// reasoningNotes names the reasoning settings c of a request of protocol client that
// the model serving model cannot take.
func (s *Server) reasoningNotes(client wire.Protocol, c *wire.ReasoningConfig, model string) []string {
	t, ok := s.Targets[model]
	if !ok {
		return nil
	}
	return wire.ReasoningNotes(client, c, t.Protocol, t.Model)
}

// modelFiles returns req with its files as the model serving it reads them
// (wire.ModelFiles), turned into text once, at submission, so the job's hops do not
// extract a PDF's text again each; a file the model can read neither as it is nor as
// text is a 400 here rather than a job that fails when the model is called. Files
// given by URL that the model cannot take by URL are read first, once (readFileURLs).
func (s *Server) modelFiles(ctx context.Context, req *wire.Request) (*wire.Request, *wire.Error) {
	t, ok := s.Targets[req.Model]
	if !ok || t.API == nil {
		return req, nil
	}
	out, err := s.readFileURLs(ctx, req, t.API)
	if err == nil {
		out, err = wire.ModelFiles(out, t.API, req.Model)
	}
	if err != nil {
		return nil, wire.AsError(err)
	}
	return out, nil
}

// checkSearch refuses search settings the fleet cannot serve at all, and notes a
// search declaration on a fleet without web search.
func (s *Server) checkSearch(req *wire.Request) *wire.Error {
	if req.Search == nil {
		return nil
	}
	if s.Tools == nil {
		req.Notes = append(req.Notes, "web search is not configured on this server: the model answers without searching")
		return nil
	}
	if e := req.Search.Engine; e != "" {
		if _, ok := s.Tools.Engine(e); !ok {
			return wire.Invalid("tools", "engine %q is not one of this fleet's engines", e)
		}
	}
	return nil
}

// waitError is the error for a synchronous wait that ended without the job (nil: the
// client left).
func (s *Server) waitError(jobID string, err error) *wire.Error {
	switch {
	case errors.Is(err, errWaitTimeout):
		return &wire.Error{Status: http.StatusGatewayTimeout, Type: "timeout", Code: "job_still_running",
			Message: fmt.Sprintf("The job %s is still running; fetch GET /v1/jobs/%s for its answer.", jobID, jobID)}
	case errors.Is(err, context.Canceled):
		return nil
	}
	s.Log.Warn("api: reading a job failed", "job", jobID, "err", err) // the details name Redis's address
	return &wire.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("Reading the job failed; fetch GET /v1/jobs/%s for its answer.", jobID)}
}

// answerOf is a job's answer in canonical form, as a client of protocol p that sent
// req is shown it: the chat worker's stored answer (wire.DecodeAnswer) with the job's
// searches (those of tools req declared: wire.Response.ShowTo), or the job's
// current status. req's notes are added, which an answer stored before answers
// carried them lacks. The error is set for a job that failed or was cancelled.
func answerOf(job *state.Job, req *wire.Request, p wire.Protocol) (*wire.Response, *wire.Error) {
	var notes []string
	if req != nil {
		notes = req.AllNotes()
	}
	base := &wire.Response{ID: job.ID, JobID: job.ID, Model: job.Model, Created: job.Created, Finished: job.Finished, Notes: notes}
	switch job.Status {
	case state.Completed:
		resp, err := wire.DecodeAnswer(job.Response)
		if err == nil {
			err = resp.AddTrace(job.Trace)
		}
		if err != nil {
			return base, &wire.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: "The job's answer is unreadable."}
		}
		resp.ShowTo(req, p)
		resp.ID, resp.JobID, resp.Model, resp.Created, resp.Finished, resp.Status = job.ID, job.ID, job.Model, job.Created, job.Finished, wire.StatusCompleted
		for _, n := range notes {
			if !slices.Contains(resp.Notes, n) {
				resp.Notes = append(resp.Notes, n)
			}
		}
		return resp, nil
	case state.Failed:
		base.Status, base.Error = wire.StatusFailed, jobFailure(job.Error)
		return base, base.Error
	case state.Cancelled:
		base.Status, base.Error = wire.StatusCancelled, jobCancelled()
		return base, base.Error
	case state.Running:
		base.Status = wire.StatusInProgress
	default:
		base.Status = wire.StatusQueued
	}
	return base, nil
}

// getResponse is GET /v1/responses/{id}: a Responses answer of the caller's tenant,
// complete or as far as it has come.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.PathValue("id"), research.IDPrefix) && s.Research != nil {
		s.getResearchResponse(w, r)
		return
	}
	job := s.loadJob(w, r)
	if job == nil {
		return
	}
	stored, err := wire.DecodeStored(job.Request)
	if err != nil || stored.Protocol != wire.OpenAIResponses {
		writeWireError(w, responses.Client, storedResponseNotFound(job.ID))
		return
	}
	rec, err := s.Store.Jobs.GetResponse(r.Context(), job.ID)
	if err != nil || rec.Tenant != job.Tenant {
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			writeWireError(w, responses.Client, unavailable("Reading the response"))
			return
		}
		writeWireError(w, responses.Client, storedResponseNotFound(job.ID)) // never stored (store: false), expired or deleted
		return
	}
	resp, e := answerOf(job, stored.Request, wire.OpenAIResponses)
	resp.Echo = rec.Echo
	resp.SealReasoning(stored.Request, s.Reasoning, job.Tenant)
	if e != nil && resp.Status != wire.StatusFailed && resp.Status != wire.StatusCancelled {
		writeWireError(w, responses.Client, e)
		return
	}
	writeResponse(w, responses.Client, resp)
}
