package ingress

import (
	"context"
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// replayJob is POST /v1/jobs/{id}/replay: a new job with the ended job's request and
// model, whose searches are all answered from the searches that job recorded — none
// is paid for — so its answer can be audited, or re-evaluated after a prompt or model
// change. A search the original did not make gets a SEARCH_NOT_RECORDED result the
// model reads. The new job links to the original (replay_of) and is answered like
// POST /v1/jobs: 202 with the job. A tenant replays only its own jobs.
func (s *Server) replayJob(w http.ResponseWriter, r *http.Request, orig *state.Job) {
	if orig.Kind != "chat" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "job_not_replayable", "id", "Only chat jobs can be replayed.")
		return
	}
	if !orig.Status.Terminal() {
		writeError(w, http.StatusConflict, "invalid_request_error", "job_not_finished", "id",
			"The job has not ended yet: its searches are still being recorded. Replay it once it has ended.")
		return
	}
	now := time.Now().UTC()
	job := &state.Job{ID: state.NewID("job_"), FreshID: true, Tenant: orig.Tenant, Kind: "chat", Model: orig.Model, Request: orig.Request,
		Created: now, Deadline: now.Add(s.JobTimeout), ReplayOf: orig.ID, Band: bandFor(r, bus.BandAsync)}
	// A replay is a new job: it takes one of the tenant's job slots like any other,
	// freed again if the job is not accepted.
	if _, ok := s.admit(w, r, chatCodec, job, holdNone); !ok {
		return
	}
	if !s.submit(r.Context(), w, job, jobSubject(job), chatJob(job), false) {
		s.JobFinished(context.WithoutCancel(r.Context()), job)
		return
	}
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	writeJSON(w, http.StatusAccepted, viewOf(job))
}
