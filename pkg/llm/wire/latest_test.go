package wire_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The latest user turn's text is what the intent classifier reads, in whichever
// protocol the conversation came: text parts joined by lines, images left out, a turn
// of tool results alone not a user turn (Anthropic's form), one with text too a turn.
func TestLatestUserText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		codec wire.ClientCodec
		body  string
		want  string
	}{
		{"string content", openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"search the web for Go"}]}`, "search the web for Go"},
		{"parts", openaichat.Client, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is in"},{"type":"image_url","image_url":{"url":"data:image/png;base64,xx"}},{"type":"text","text":"this picture?"}]}]}`,
			"what is in\nthis picture?"},
		{"responses input_text", responses.Client, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"谷歌一下"},{"type":"input_image","image_url":"https://x/y.png"}]}]}`, "谷歌一下"},
		{"image only", openaichat.Client, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, ""},
		{"latest user wins", openaichat.Client, `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"first question"},
			{"role":"assistant","content":"answer"},{"role":"user","content":"second question"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"web_search","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"results"}]}`, "second question"},
		{"no user message", responses.Client, `{"model":"m","input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"y"}]}]}`, ""},
		{"anthropic tool results are not a user turn", anthropic.Client, `{"model":"m","max_tokens":9,"messages":[
			{"role":"user","content":[{"type":"text","text":"find news online"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"calc","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"}]}]}`, "find news online"},
		{"tool result with text is a user turn", anthropic.Client, `{"model":"m","max_tokens":9,"messages":[
			{"role":"user","content":"old"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"calc","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"},{"type":"text","text":"now search the web"}]}]}`, "now search the web"},
	}
	for _, c := range cases {
		r, err := c.codec.DecodeRequest([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := wire.LatestUserText(r.Messages); got != c.want {
			t.Errorf("%s: LatestUserText = %q, want %q", c.name, got, c.want)
		}
	}
	if got := wire.LatestUserText(nil); got != "" {
		t.Errorf("no messages: %q", got)
	}
}
