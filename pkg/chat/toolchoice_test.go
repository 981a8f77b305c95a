package chat

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A request that forces web_search makes the first hop's model call name it in
// tool_choice, and only that one: later hops, and a hop that does not offer the tool,
// leave the model free to answer. The job's request is never changed.
func TestForcedSearchOnTheFirstHopOnly(t *testing.T) {
	t.Parallel()
	req := &wire.Request{Model: "m", Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "hi"}}}},
		Search: &llm.SearchOptions{Requested: true, Forced: true}}
	forced := func(h int, offered bool) bool {
		tc := hopRequest(req, h, offered).ToolChoice
		return tc != nil && tc.Mode == "tool" && tc.Name == intent.ToolName
	}
	if !forced(0, true) {
		t.Error("hop 0 does not force web_search")
	}
	for _, c := range []struct {
		h       int
		offered bool
	}{{1, true}, {0, false}} {
		if hopRequest(req, c.h, c.offered).ToolChoice != nil {
			t.Errorf("hop %d offered %v names a tool", c.h, c.offered)
		}
	}
	if req.ToolChoice != nil {
		t.Error("the job's request was changed")
	}
	req.Search.Forced = false
	if forced(0, true) {
		t.Error("not forced, yet web_search is named")
	}
}
