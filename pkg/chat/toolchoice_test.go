package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// A request that forces web_search makes the first hop's model call name it in
// tool_choice, and only that one: later hops, and a hop that does not offer the tool,
// leave the model free to answer. The job's request is never changed.
func TestForcedSearchOnTheFirstHopOnly(t *testing.T) {
	t.Parallel()
	req := &llm.ChatRequest{Model: "m", Extra: map[string]json.RawMessage{"temperature": json.RawMessage("0")},
		Search: &llm.SearchOptions{Requested: true, Forced: true}}
	msgs := []json.RawMessage{json.RawMessage(`{"role":"user","content":"hi"}`)}
	tools := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"web_search"}}`)}
	body := func(h int, offered bool) string {
		b, err := hopRequest(req, h, offered).Body("m", msgs, tools)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if b := body(0, true); !strings.Contains(b, `"tool_choice":{"type":"function","function":{"name":"web_search"}}`) {
		t.Errorf("hop 0: %s", b)
	}
	for _, c := range []struct {
		h       int
		offered bool
	}{{1, true}, {0, false}} {
		if b := body(c.h, c.offered); strings.Contains(b, "tool_choice") {
			t.Errorf("hop %d offered %v: %s", c.h, c.offered, b)
		}
	}
	if _, ok := req.Extra["tool_choice"]; ok {
		t.Error("the job's request was changed")
	}
	req.Search.Forced = false
	if b := body(0, true); strings.Contains(b, "tool_choice") {
		t.Errorf("not forced: %s", b)
	}
}
