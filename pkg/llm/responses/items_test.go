package responses_test

import (
	"encoding/json"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// An answer that ends in a function call without writing has no message item, whole
// or streamed (an empty text part included), and every output item's id names its
// response.
func TestNoEmptyMessageBeforeAFunctionCall(t *testing.T) {
	r := &wire.Response{ID: "resp_abc", Model: "m", Status: wire.StatusCompleted, Stop: wire.StopToolUse, Content: []wire.Part{
		{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: "0_call_1", Name: "web_search", Query: "q"}},
		{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "0_call_1"}},
		{Kind: wire.PartText, Text: ""},
		{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "call_9", Name: "get_weather", Arguments: "{}"}},
	}}
	b, err := responses.Client.EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Output []struct{ Type, ID string } `json:"output"`
	}
	json.Unmarshal(b, &o)
	if len(o.Output) != 2 || o.Output[0].Type != "web_search_call" || o.Output[1].Type != "function_call" {
		t.Fatalf("output %s", b)
	}
	for _, it := range o.Output {
		if got := responses.ItemResponse(it.ID); got != "resp_abc" {
			t.Errorf("item %s names response %q", it.ID, got)
		}
	}

	st := responses.Client.NewStream()
	start := *r
	start.Status, start.Content = wire.StatusInProgress, nil
	evs := st.Start(&start)
	partial := *r
	partial.Content = r.Content[:3]
	evs = append(evs, st.Update(&partial)...)
	evs = append(evs, st.Finish(r)...)
	for _, e := range evs {
		var ev struct {
			Type string                `json:"type"`
			Item struct{ Type string } `json:"item"`
		}
		json.Unmarshal(e.Data, &ev)
		if ev.Item.Type == "message" || ev.Type == "response.content_part.added" {
			t.Errorf("the stream opened a message: %s", e.Data)
		}
	}
}

func TestItemResponse(t *testing.T) {
	for id, want := range map[string]string{
		"msg_resp_abc": "resp_abc", "ws_resp_abc_0_call_1": "resp_abc", "fc_resp_abc_call_9": "resp_abc", "msg_resp_abc_in2": "resp_abc",
		"rs_abc": "", "msg_": "", "ws_0_call_1": "", "resp_abc": "", "": "", "msg_resp_": "",
	} {
		if got := responses.ItemResponse(id); got != want {
			t.Errorf("ItemResponse(%q) = %q, want %q", id, got, want)
		}
	}
}
