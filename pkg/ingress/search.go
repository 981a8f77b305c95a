package ingress

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// directSearch is POST /v1/search: one search through the search workers, no main
// model. The body takes the web_search tool's arguments — {query, engine?, recency?,
// count?, allowed_domains?, blocked_domains?, max_age?, cache?, strict?} ("domains" is accepted for
// allowed_domains) — validated exactly as the model's calls are, and the answer is the
// normalized result.
func (s *Server) directSearch(w http.ResponseWriter, r *http.Request) {
	if s.Tools == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "search_disabled", "", "No search engines are configured.")
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil && top != nil {
		if d, ok := top["domains"]; ok {
			if _, both := top["allowed_domains"]; !both {
				top["allowed_domains"] = d
			}
			delete(top, "domains")
			body, _ = json.Marshal(top)
		}
	}
	call, aerr := s.Tools.Parse(string(body), false)
	if aerr != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", aerr.Type, "", aerr.Details)
		return
	}
	now := time.Now().UTC()
	job := &state.Job{ID: state.NewID("srch_"), FreshID: true, Tenant: tenantOf(r), Kind: "search", Request: body, Created: now, Deadline: now.Add(s.JobTimeout)}
	band := bandFor(r, bus.BandSync)
	s.runDirect(w, r, job, bus.SubjectSearchOf(call.Engine, band, job.Tenant), search.Request{JobID: job.ID, Hop: 0, CallID: "direct", Engine: call.Engine, Query: call.Query, Deadline: job.Deadline, Direct: true, Tenant: job.Tenant, Band: band})
}

// runDirect runs a job that is one search or fetch, no model (POST /v1/search,
// POST /v1/fetch): admitted as a synchronous wait, published as req on subject, and
// answered with its outcome when its worker ends it.
func (s *Server) runDirect(w http.ResponseWriter, r *http.Request, job *state.Job, subject string, req bus.Payload) {
	release, ok := s.admit(w, r, chatCodec, job, holdSync)
	if !ok {
		return
	}
	defer release()
	waiter, err := s.watch(job.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "The fleet is unavailable.")
		return
	}
	defer waiter.stop()
	if !s.submit(r.Context(), w, job, subject, req, false) {
		return
	}
	w.Header().Set("X-Searchfleet-Job-Id", job.ID)
	done, err := waiter.wait(r.Context(), s, job.ID, s.SyncWait, nil)
	if err != nil {
		if e := s.waitError(job.ID, err); e != nil {
			writeAPIError(w, e)
		}
		return
	}
	s.writeOutcome(w, done)
}
