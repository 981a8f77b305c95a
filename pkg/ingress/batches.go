package ingress

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/searchfleet/searchfleet/pkg/batch"
)

// createBatch is POST /v1/batches: the OpenAI shape ({input_file_id, endpoint,
// completion_window, metadata}) or the simple form ({queries, model, metadata,
// callback}). Every line is validated before anything is created; the batch is then
// recorded and queued for expansion, and answered as status "validating".
//
// The body is bounded by MaxBody (FLEET_MAX_BODY_BYTES) like any other and read as a
// stream (batch.Service.CreateFrom): the questions go to the batch's input file as
// they arrive.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	v, err := s.Batches.CreateFrom(r.Context(), tenantOf(r), http.MaxBytesReader(w, r.Body, s.MaxBody))
	writeBatch(w, v, err)
}

// getBatch is GET /v1/batches/{id}. Looking at a batch that seems stuck also asks the
// expander to repair it.
func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	v, err := s.Batches.Get(r.Context(), tenantOf(r), r.PathValue("id"))
	writeBatch(w, v, err)
}

// cancelBatch is POST /v1/batches/{id}/cancel: the batch moves to cancelling at once;
// the expander then cancels its unfinished jobs and writes the partial output.
// Cancelling a batch that is cancelling or cancelled again answers it as it is.
func (s *Server) cancelBatch(w http.ResponseWriter, r *http.Request) {
	v, err := s.Batches.Cancel(r.Context(), tenantOf(r), r.PathValue("id"))
	writeBatch(w, v, err)
}

// writeBatch answers with a batch the batch service returned, or its error.
func writeBatch(w http.ResponseWriter, v batch.View, err error) {
	if err != nil {
		writeBatchError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// listBatches is GET /v1/batches: the tenant's batches, newest first, paged with
// limit (1..100, default 20) and after.
func (s *Server) listBatches(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := countParam(w, q, "limit", 20, 100)
	if !ok {
		return
	}
	batches, more, err := s.Batches.List(r.Context(), tenantOf(r), q.Get("after"), limit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Listing batches failed.")
		return
	}
	writeJSON(w, http.StatusOK, listOf(batches, func(v batch.View) string { return v.ID }, more))
}

// writeBatchError answers an error of the batch service: a refusal with the status of
// its kind, any other error as a 503.
func writeBatchError(w http.ResponseWriter, err error) {
	e, ok := errors.AsType[*batch.Error](err)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "The batch service failed; try again.")
		return
	}
	if e.Input != nil {
		writeJSON(w, http.StatusBadRequest, e.Input.AsInputError(e.Param))
		return
	}
	status, typ := http.StatusBadRequest, "invalid_request_error"
	switch e.Kind {
	case batch.Limited:
		status, typ = http.StatusTooManyRequests, "rate_limit_exceeded"
	case batch.TooLarge:
		status = http.StatusRequestEntityTooLarge
	case batch.Full:
		status, typ = http.StatusInsufficientStorage, "server_error"
	case batch.NotFound:
		status = http.StatusNotFound
	case batch.Conflict:
		status = http.StatusConflict
	case batch.Unavailable:
		status, typ = http.StatusServiceUnavailable, "server_error"
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(int(e.RetryAfter.Seconds()), 1)))
	}
	writeError(w, status, typ, e.Code, e.Param, e.Message)
}

// list is an OpenAI list page.
type list[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

func listOf[T any](data []T, id func(T) string, more bool) list[T] {
	l := list[T]{Object: "list", Data: data, HasMore: more}
	if len(data) > 0 {
		first, last := id(data[0]), id(data[len(data)-1])
		l.FirstID, l.LastID = &first, &last
	}
	return l
}

// mapped is f of each of xs, in order (empty, not nil, for none: a list's data is []).
func mapped[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// countParam reads the query parameter name, a count (1..most, default def), such as a
// list's limit; it has answered when it returns false.
func countParam(w http.ResponseWriter, q url.Values, name string, def, most int) (int, bool) {
	v := q.Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", name, fmt.Sprintf("%s must be an integer from 1 to %d", name, most))
		return 0, false
	}
	return n, true
}
