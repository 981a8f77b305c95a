package ingress

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The rest of the Responses resource around a stored response: cancelling a
// background one, deleting one, and listing the input it ran on, each within the
// caller's tenant (another tenant's response is not found).

// storedResponseNotFound is the answer for a response id the tenant has no stored
// response for.
func storedResponseNotFound(id string) *wire.Error { return notFound("response_id", "Response", id) }

// loadStored reads the stored response the path names, with its job; it has answered
// when it returns nil.
func (s *Server) loadStored(w http.ResponseWriter, r *http.Request) (*state.StoredResponse, *state.Job) {
	id := r.PathValue("id")
	rec, job, e := s.storedResponse(r.Context(), tenantOf(r), "response_id", id)
	if e != nil {
		if e.Status == http.StatusBadRequest { // the previous_response_id wording
			e = storedResponseNotFound(id)
		}
		writeWireError(w, responses.Client, e)
		return nil, nil
	}
	return rec, job
}

// writeStoredResponse answers with the response object of a stored response.
func (s *Server) writeStoredResponse(w http.ResponseWriter, job *state.Job, rec *state.StoredResponse) {
	resp, _ := answerOf(job, storedRequest(job), wire.OpenAIResponses)
	resp.Echo = rec.Echo
	writeResponse(w, responses.Client, resp)
}

// cancelResponse is POST /v1/responses/{id}/cancel: a background response that is
// queued or in progress is cancelled (its job ends cancelled and makes no further
// paid calls) and answered with status cancelled; one cancelled already is answered
// as it is. A response that was not created with background: true, or that has
// completed or failed, cannot be cancelled (400, as OpenAI answers). A research run's
// id (a research model's response) cancels the run and its children.
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.PathValue("id"), research.IDPrefix) && s.Research != nil {
		s.cancelResearchResponse(w, r) // a research run and its children
		return
	}
	rec, job := s.loadStored(w, r)
	if job == nil {
		return
	}
	if string(rec.Echo["background"]) != "true" {
		writeWireError(w, responses.Client, wire.Invalid("", "Only responses created with 'background': true can be cancelled."))
		return
	}
	if !job.Status.Terminal() {
		if err := s.Ender.End(r.Context(), job.ID, jobs.Ending{Status: state.Cancelled}); err != nil {
			s.Log.Warn("api: cancelling a response", "response", job.ID, "err", err)
			writeWireError(w, responses.Client, unavailable("Cancelling"))
			return
		}
		var err error
		if job, err = s.Store.Jobs.GetJob(r.Context(), job.ID); err != nil {
			writeWireError(w, responses.Client, unavailable("Reading the response"))
			return
		}
	}
	if job.Status != state.Cancelled {
		writeWireError(w, responses.Client, wire.Invalid("", "Cannot cancel a %s response.", job.Status)) // completed, failed
		return
	}
	s.writeStoredResponse(w, job, rec)
}

// deleteResponse is DELETE /v1/responses/{id}: the stored response is deleted (a
// retrieve, a previous_response_id or an item_reference naming it is not found from
// then on), and one still running is cancelled first. Its job's record is kept for
// the retention period like every job's.
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) {
	_, job := s.loadStored(w, r)
	if job == nil {
		return
	}
	if !job.Status.Terminal() {
		if err := s.Ender.End(r.Context(), job.ID, jobs.Ending{Status: state.Cancelled}); err != nil {
			s.Log.Warn("api: cancelling a deleted response", "response", job.ID, "err", err)
			writeWireError(w, responses.Client, unavailable("Deleting"))
			return
		}
	}
	if err := s.Store.Jobs.DeleteResponse(r.Context(), job.ID); err != nil {
		s.Log.Warn("api: deleting a response", "response", job.ID, "err", err)
		writeWireError(w, responses.Client, unavailable("Deleting"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": job.ID, "object": "response", "deleted": true})
}

// inputItems is GET /v1/responses/{id}/input_items: the items of the request's own
// input (not those previous_response_id or a conversation put before it), each with
// an id, as a cursor page (listPage).
func (s *Server) inputItems(w http.ResponseWriter, r *http.Request) {
	rec, job := s.loadStored(w, r)
	if job == nil {
		return
	}
	items, err := ownInput(job.ID, rec)
	if err != nil {
		writeWireError(w, responses.Client, &wire.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: "The stored response is unreadable."})
		return
	}
	writeListPage(w, r, items)
}

// ownInput is the request's own input items of stored response respID (not those
// previous_response_id or a conversation put before them), each as a list shows it
// (normalizeItem), with an id of its response (wire.InputItemID) when the client gave
// none.
func ownInput(respID string, rec *state.StoredResponse) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(rec.Input, &items); err != nil {
		return nil, err
	}
	items = items[min(rec.Prior, len(items)):]
	for i, it := range items {
		items[i] = normalizeItem(it, func(typ string) string { return responses.InputItemID(respID, typ, rec.Prior+i) })
	}
	return items, nil
}

// itemID is an item's id ("" if it has none).
func itemID(item json.RawMessage) string {
	var head struct {
		ID string `json:"id"`
	}
	json.Unmarshal(item, &head)
	return head.ID
}

// normalizeItem is an item as the fleet keeps and lists it: with an id (newID's, of
// the item's type, when it has none), and a message with its type, status and
// content parts.
func normalizeItem(item json.RawMessage, newID func(typ string) string) json.RawMessage {
	var it map[string]json.RawMessage
	if json.Unmarshal(item, &it) != nil || it == nil {
		return item
	}
	var typ, id, role string
	json.Unmarshal(it["type"], &typ)
	json.Unmarshal(it["id"], &id)
	json.Unmarshal(it["role"], &role)
	if typ == "" && role != "" {
		typ = "message"
		it["type"] = json.RawMessage(`"message"`)
	}
	if id == "" {
		it["id"], _ = json.Marshal(newID(typ))
	}
	if typ == "message" {
		if isNullJSON(it["status"]) {
			it["status"] = json.RawMessage(`"completed"`)
		}
		var text string
		if json.Unmarshal(it["content"], &text) == nil {
			part := "input_text"
			if role == "assistant" {
				part = "output_text"
			}
			it["content"], _ = json.Marshal([]map[string]any{{"type": part, "text": text}})
		}
	}
	b, err := json.Marshal(it)
	if err != nil {
		return item
	}
	return b
}

// writeListPage answers with a page of items (in the order they were added) as the
// OpenAI SDKs' cursor page reads it: {object: list, data, first_id, last_id,
// has_more}, after the query's order (desc by default: newest first), after (the id
// of the item the page starts past) and limit (1 to 100, default 20). include is
// accepted: every item is given whole.
func writeListPage(w http.ResponseWriter, r *http.Request, items []json.RawMessage) {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeWireError(w, responses.Client, wire.Invalid("limit", "'limit' must be an integer from 1 to 100."))
			return
		}
		limit = n
	}
	switch q.Get("order") {
	case "", "desc":
		items = slices.Clone(items)
		slices.Reverse(items)
	case "asc":
	default:
		writeWireError(w, responses.Client, wire.Invalid("order", "'order' must be asc or desc."))
		return
	}
	start := 0
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(it json.RawMessage) bool { return itemID(it) == after })
		if i < 0 {
			writeWireError(w, responses.Client, &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "after",
				Message: fmt.Sprintf("No item with id '%s' in the list.", redact.Clip(after, 64))})
			return
		}
		start = i + 1
	}
	end := min(start+limit, len(items))
	writeJSON(w, http.StatusOK, listOf(append([]json.RawMessage{}, items[start:end]...), itemID, end < len(items)))
}
