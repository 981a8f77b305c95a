package ingress

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// compactParams are the parameters of POST /v1/responses/compact (Open Responses
// CompactResponseMethodPublicBody); any other is refused.
var compactParams = []string{"model", "input", "previous_response_id", "instructions", "prompt_cache_key"}

// compactResponse is POST /v1/responses/compact: the conversation of input (after
// previous_response_id's, if named) compacted into an input window for a later
// request — the client's own turns as they are, then one compaction item for the rest
// (wire.Compact). No model is called and nothing is stored, so it answers at once, the
// same for every model, with zero usage. Instructions are not part of the window: a
// request sends its own. A conversation the fleet cannot compact, or a compaction item
// it did not write, is a 400 in the Responses error shape.
func (s *Server) compactResponse(w http.ResponseWriter, r *http.Request) {
	fail := func(e *wire.Error) { writeWireError(w, responses.Client, e) }
	top, ok := s.objectBody(w, r, false, " POST /v1/responses/compact takes "+strings.Join(compactParams, ", ")+".", compactParams)
	if !ok {
		return
	}
	var model string
	if isNullJSON(top["model"]) {
		fail(wire.Invalid("model", "Missing required parameter: 'model'."))
		return
	} else if json.Unmarshal(top["model"], &model) != nil || strings.TrimSpace(model) == "" {
		fail(wire.Invalid("model", "'model' must be a non-empty string"))
		return
	}
	if e := s.knownModel(model); e != nil {
		fail(e)
		return
	}
	if raw := top["instructions"]; !isNullJSON(raw) && json.Unmarshal(raw, new(string)) != nil {
		fail(wire.Invalid("instructions", "'instructions' must be a string"))
		return
	}
	delete(top, "instructions")
	body, _ := json.Marshal(top)
	rr, e := s.resolveResponses(r.Context(), tenantOf(r), body)
	if e != nil {
		fail(e)
		return
	}
	req, err := responses.Client.DecodeRequest(rr.body)
	if err != nil {
		fail(wire.AsError(err))
		return
	}
	c, err := responses.Compact(req)
	if err != nil {
		fail(wire.AsError(err))
		return
	}
	id := state.NewID("cmp_")
	output, err := responses.CompactionOutput(id, c)
	if err != nil {
		fail(wire.AsError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "object": "response.compaction", "created_at": time.Now().Unix(), "output": output,
		"usage": map[string]any{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
			"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}},
	})
}
