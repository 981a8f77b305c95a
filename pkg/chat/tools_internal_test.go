package chat

import (
	"encoding/json"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Deciding whether hop 1 offers web_fetch renders the conversation (it asks whether
// a search result brought a source), and that rendering is the one the hop's model
// call is built from: a step renders its messages once.
func TestOfferFetchRendersTheMessagesTheModelCallUses(t *testing.T) {
	t.Parallel()
	turn, _ := json.Marshal(&turn{Turn: wire.Turn{Stop: wire.StopToolUse, Parts: []wire.Part{
		{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "c1", Name: "web_search", Arguments: `{"query":"weather in Paris"}`}}}}, Offered: true})
	v := searchedView(t, turn)
	w := &Worker{MaxFetches: 2, MaxHops: 4}
	if !w.offerFetch(v, 1) {
		t.Fatal("hop 1 does not offer web_fetch with a source in the chain")
	}
	r, ok := v.rendered[1]
	if !ok {
		t.Fatal("offerFetch did not keep the messages it rendered")
	}
	msgs, srcs := v.history(1)
	if len(msgs) != 2 || &msgs[0] != &r.msgs[0] || srcs != r.srcs || len(srcs.list) != 1 {
		t.Errorf("the model call renders its messages again: %d messages, %d sources", len(msgs), len(srcs.list))
	}
}

// searchedView is the view of job j1 ("weather in Paris?") whose hop 0 stored turn
// (one web_search call, c1) and whose call found one page.
func searchedView(t *testing.T, turn []byte) *view {
	t.Helper()
	calls, _ := json.Marshal([]call{{ID: "c1", Engine: "brave", Query: engines.Query{Query: "weather in Paris"}, Salt: "00"}})
	done, err := bus.Encode("test", search.Done{JobID: "j1", Hop: 0, CallID: "c1", Engine: "brave", Result: engines.Result{Query: "weather in Paris",
		Citation: engines.Citation{Sources: []engines.Source{{Web: engines.Web{Title: "Paris weather", URI: "https://weather.example/paris"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	chain := &state.Chain{Hops: map[int]*state.Hop{0: {Turn: turn, Calls: calls, Expected: 1, Results: map[string]json.RawMessage{"c1": done.Data}}}}
	req := &wire.Request{Model: "m", Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "weather in Paris?"}}}}}
	stored, err := wire.EncodeStored(wire.OpenAIChat, req)
	if err != nil {
		t.Fatal(err)
	}
	v, err := newView(&state.Job{ID: "j1", Model: "m", Request: stored}, chain)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
