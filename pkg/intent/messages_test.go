package intent

import (
	"encoding/json"
	"testing"
)

func TestLatestUserText(t *testing.T) {
	t.Parallel()
	msgs := func(raw ...string) []json.RawMessage {
		out := make([]json.RawMessage, len(raw))
		for i, r := range raw {
			out[i] = json.RawMessage(r)
		}
		return out
	}
	cases := []struct {
		name string
		in   []json.RawMessage
		want string
	}{
		{"string content", msgs(`{"role":"user","content":"search the web for Go"}`), "search the web for Go"},
		{"parts", msgs(`{"role":"user","content":[{"type":"text","text":"what is in"},{"type":"image_url","image_url":{"url":"data:image/png;base64,xx"}},{"type":"text","text":"this picture?"}]}`),
			"what is in\nthis picture?"},
		{"responses input_text", msgs(`{"role":"user","content":[{"type":"input_text","text":"谷歌一下"},{"type":"input_image","image_url":"https://x/y.png"}]}`), "谷歌一下"},
		{"image only", msgs(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`), ""},
		{"odd part", msgs(`{"role":"user","content":[{"type":"text","text":5},{"type":"text","text":"kept"}]}`), "kept"},
		{"latest user wins", msgs(
			`{"role":"system","content":"be brief"}`,
			`{"role":"user","content":"first question"}`,
			`{"role":"assistant","content":"answer"}`,
			`{"role":"user","content":"second question"}`,
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"web_search","arguments":"{}"}}]}`,
			`{"role":"tool","tool_call_id":"call_1","content":"results"}`,
		), "second question"},
		{"no user message", msgs(`{"role":"system","content":"x"}`, `{"role":"assistant","content":"y"}`), ""},
		{"empty", nil, ""},
		{"null content", msgs(`{"role":"user","content":null}`), ""},
		{"malformed latest skipped", msgs(`{"role":"user","content":"ok"}`, `{"role":"user",`, `[1,2]`, `"x"`), "ok"},
		{"role not a string", msgs(`{"role":"user","content":"ok"}`, `{"role":1,"content":"no"}`), "ok"},
		{"object content", msgs(`{"role":"user","content":{"text":"no"}}`), ""},
		{"anthropic tool results are not a user turn", msgs(
			`{"role":"user","content":[{"type":"text","text":"find news online"}]}`,
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"calc","input":{}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"}]}`,
		), "find news online"},
		{"tool result with text is a user turn", msgs(
			`{"role":"user","content":"old"}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"},{"type":"text","text":"now search the web"}]}`,
		), "now search the web"},
		{"empty parts", msgs(`{"role":"user","content":"old"}`, `{"role":"user","content":[]}`), ""},
	}
	for _, c := range cases {
		if got := LatestUserText(c.in); got != c.want {
			t.Errorf("%s: LatestUserText = %q, want %q", c.name, got, c.want)
		}
	}
}
