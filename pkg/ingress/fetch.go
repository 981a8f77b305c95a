package ingress

import (
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// directFetch is POST /v1/fetch: one page read by the fetch workers, no main model.
// The body takes the web_fetch tool's arguments — {"url": "https://…"} — validated
// exactly as the model's calls are; the page is fetched through the same SSRF guard
// and caps. The answer is {"object": "fetch.result", "id", "page": {url, final_url,
// status, content_type, title, text, bytes, truncated, kind, retrieved}}, its cost
// headers those of its job's usage record (one fetch, no cost); a page that
// could not be read is an error: 400 for a URL that may not or cannot be read
// (FETCH_INVALID_URL, FETCH_REFUSED, FETCH_UNSUPPORTED_CONTENT_TYPE), 502 otherwise.
func (s *Server) directFetch(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	u, aerr := intent.ParseFetch(string(body))
	if aerr != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", aerr.Type, "url", aerr.Details)
		return
	}
	now := time.Now().UTC()
	job := &state.Job{ID: state.NewID("ftch_"), FreshID: true, Tenant: tenantOf(r), Kind: "fetch", Request: body, Created: now, Deadline: now.Add(s.JobTimeout)}
	s.runDirect(w, r, job, bus.SubjectFetch, search.FetchRequest{JobID: job.ID, Hop: 0, CallID: "direct", URL: u, Deadline: job.Deadline, Direct: true, Tenant: job.Tenant, Band: bus.BandSync})
}
