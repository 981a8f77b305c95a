package fleet_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// A small Responses request naming a large stored item many times is refused while it
// is resolved, with 413 naming the limit, and the model receives nothing; so is one
// with more item_references than a request may have.
func TestExpandedResponsesRequestBounded(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	big := strings.Repeat("lorem ipsum ", 1<<20/12) + "sim:nosearch"
	status, b, _ := f.Do(t, "POST", "/v1/responses", map[string]any{"model": demo.Model,
		"input": []any{map[string]any{"type": "message", "role": "user", "id": "msg_big", "content": big}}})
	if status != http.StatusOK {
		t.Fatalf("the 1 MB request: %d %.300s", status, b)
	}
	var first struct {
		ID string `json:"id"`
	}
	json.Unmarshal(b, &first)

	refs := make([]any, 50)
	for i := range refs {
		refs[i] = map[string]any{"type": "item_reference", "id": "msg_big"}
	}
	small, _ := json.Marshal(map[string]any{"model": demo.Model, "previous_response_id": first.ID, "input": refs})
	if len(small) > 2500 {
		t.Fatalf("the request is %d bytes, want about 2 KB", len(small))
	}
	f.Sim.Reset()
	status, b, _ = f.Do(t, "POST", "/v1/responses", small)
	var e struct {
		Error struct {
			Code, Message string
		} `json:"error"`
	}
	json.Unmarshal(b, &e)
	if status != http.StatusRequestEntityTooLarge || e.Error.Code != "request_too_large" || !strings.Contains(e.Error.Message, "4194304 bytes") {
		t.Fatalf("50 references to a 1 MB item: %d %.400s, want 413 request_too_large naming the limit", status, b)
	}
	if n := f.Sim.Stats().Requests["model"]; n != 0 {
		t.Errorf("the model received %d requests for a refused request", n)
	}

	many := make([]any, 65)
	for i := range many {
		many[i] = map[string]any{"type": "item_reference", "id": "msg_nothing"}
	}
	status, b, _ = f.Do(t, "POST", "/v1/responses", map[string]any{"model": demo.Model, "input": many})
	json.Unmarshal(b, &e)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(e.Error.Message, "at most 64 item_reference") {
		t.Errorf("65 item_references: %d %.300s, want 413 naming the bound of 64", status, b)
	}
}
