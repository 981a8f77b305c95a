package ingress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The research API (pkg/research): POST /v1/research starts a run (202), GET reads
// it or lists the tenant's, /events follows it (SSE, resumable from any event id),
// /cancel cancels it and its children, /plan approves or replaces a plan under
// review.

func (s *Server) createResearch(w http.ResponseWriter, r *http.Request) {
	if s.researchOff(w) {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var in research.Body
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "The body is not a research request: "+redact.JSONError(err))
		return
	}
	req, err := in.Request("research")
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "input", err.Error())
		return
	}
	run, shared, secret, ok := s.startResearch(w, r, req, in.Callback, in.Share != nil && !*in.Share)
	if !ok {
		return
	}
	if shared {
		w.Header().Set("Searchfleet-Shared-Run", "true")
	}
	w.Header().Set("Location", "/v1/research/"+run.ID)
	writeJSON(w, http.StatusAccepted, researchView{View: research.ViewOf(run), WebhookSecret: secret})
}

// researchOff answers 404 when research runs are not served; it has answered when it
// returns true.
func (s *Server) researchOff(w http.ResponseWriter) bool {
	if s.Research == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "", "Research runs are not enabled on this server.")
	}
	return s.Research == nil
}

// researchView is a run with the signing secret made for its callback, shown to the
// client that started it.
type researchView struct {
	research.View
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// startResearch validates a run's callback and starts it for the request's tenant
// (research.Service.Start); it has answered when ok is false.
func (s *Server) startResearch(w http.ResponseWriter, r *http.Request, req *research.Request, callback json.RawMessage, noShare bool) (run *state.Run, shared bool, secret string, ok bool) {
	tenant := tenantOf(r)
	if req.Callback, ok = s.callback(w, r, callback); !ok {
		return nil, false, "", false
	}
	run, shared, err := s.Research.Start(r.Context(), tenant, req, noShare)
	switch {
	case errors.Is(err, research.ErrInvalid):
		param, _, _ := strings.Cut(err.Error(), ":")
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", param, err.Error())
	case errors.Is(err, research.ErrNoAgent):
		writeError(w, http.StatusNotFound, "invalid_request_error", "agent_not_found", "agent", fmt.Sprintf("The research agent %q does not exist; GET /v1/research/agents lists them.", redact.Clip(req.Agent, 64)))
	case errors.Is(err, research.ErrNoModel):
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "model", fmt.Sprintf("The model %q does not exist.", redact.Clip(req.Model, 64)))
	case err != nil:
		s.logFailure(r.Context(), "api: starting a research run", "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "The fleet could not take the run; try again.")
	}
	if err != nil {
		return nil, false, "", false
	}
	if req.Callback != nil && !shared {
		// The secret is made before the run's first webhook can be (a plan or an end
		// is a model call away at least); a delivery that finds none is retried.
		if secret, err = s.Webhooks.Secret(r.Context(), tenant, run.ID); err != nil {
			s.logFailure(r.Context(), "api: recording a run's callback secret", "run", run.ID, "err", err)
		}
	}
	return run, shared, secret, true
}

// loadRun reads the run the path names, as its tenant sees it; it has answered when
// it returns nil.
func (s *Server) loadRun(w http.ResponseWriter, r *http.Request) *state.Run {
	if s.researchOff(w) {
		return nil
	}
	id := r.PathValue("id")
	run, err := s.Research.Get(r.Context(), tenantOf(r), id)
	if errors.Is(err, state.ErrNotFound) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "run_not_found", "id", fmt.Sprintf("No research run %q.", redact.Clip(id, 64)))
		return nil
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading the run failed.")
		return nil
	}
	return run
}

func (s *Server) getResearch(w http.ResponseWriter, r *http.Request, run *state.Run) {
	v := research.ViewOf(run)
	setCost(w.Header(), runSpend(run, &v))
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) listResearch(w http.ResponseWriter, r *http.Request) {
	if s.researchOff(w) {
		return
	}
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "limit", "limit must be 1 to 100")
			return
		}
		limit = n
	}
	runs, more, err := s.Research.Store.Research.TenantRuns(r.Context(), tenantOf(r), r.URL.Query().Get("after"), limit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Listing the runs failed.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": mapped(runs, research.ViewOf), "has_more": more})
}

func (s *Server) cancelResearch(w http.ResponseWriter, r *http.Request, run *state.Run) {
	ok, err := s.Research.Cancel(r.Context(), run.Tenant, run.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Cancelling failed; try again.")
		return
	}
	if !ok {
		writeError(w, http.StatusConflict, "invalid_request_error", "run_finished", "", fmt.Sprintf("The run has already ended (%s).", run.Status))
		return
	}
	s.writeRun(w, r, run.ID)
}

// writeRun answers with run id as it is now.
func (s *Server) writeRun(w http.ResponseWriter, r *http.Request, id string) {
	run, err := s.Research.Store.Research.GetRun(r.Context(), id)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading the run failed.")
		return
	}
	writeJSON(w, http.StatusOK, research.ViewOf(run))
}

// planResearch is POST /v1/research/{id}/plan: {"action": "approve"} runs the plan as
// it stands, {"plan": {"questions": [...]}} runs the plan given instead.
func (s *Server) planResearch(w http.ResponseWriter, r *http.Request, run *state.Run) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Action string         `json:"action"`
		Plan   *research.Plan `json:"plan"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Plan == nil && in.Action != "approve" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", `The body is {"action": "approve"} or {"plan": {"questions": [{"question": …}]}}.`)
		return
	}
	ok, err := research.Approve(r.Context(), s.Research.Bus, s.Research.Store, run, in.Plan)
	if err != nil && !ok && in.Plan != nil && len(in.Plan.Questions) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "plan", "The plan needs at least one question.")
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Approving the plan failed; try again.")
		return
	}
	if !ok {
		writeError(w, http.StatusConflict, "invalid_request_error", "run_not_waiting", "", fmt.Sprintf("The run does not wait for a plan (%s).", run.Status))
		return
	}
	s.writeRun(w, r, run.ID)
}

// researchPoll is how often a run's event stream looks for new events.
const researchPoll = 250 * time.Millisecond

// researchEvents is GET /v1/research/{id}/events: the run's events as SSE, each with
// its id, from after Last-Event-ID (or ?after=), until the run has ended and its last
// event is sent (or the stream's time is up: resume from the last id).
func (s *Server) researchEvents(w http.ResponseWriter, r *http.Request, run *state.Run) {
	after := 0
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			after = n
		}
	}
	ctx, done, ok := s.openStream(w, r, chatCodec, run.Tenant)
	if !ok {
		return
	}
	defer done()
	rc := startSSE(w)
	tick := time.NewTicker(researchPoll)
	defer tick.Stop()
	for {
		evs, err := s.Research.Store.Research.RunEvents(ctx, run.ID, after, 100)
		if err != nil {
			return
		}
		for _, e := range evs {
			var typ struct {
				Type string `json:"type"`
			}
			json.Unmarshal(e.Data, &typ)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, typ.Type, e.Data)
			after = e.Seq
		}
		rc.Flush()
		if len(evs) == 100 {
			continue
		}
		cur, err := s.Research.Store.Research.GetRun(ctx, run.ID)
		if err != nil {
			return
		}
		if state.RunEnded(cur.Status) || cur.Status == state.RunRequiresAction {
			if more, _ := s.Research.Store.Research.RunEvents(ctx, run.ID, after, 1); len(more) == 0 {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
