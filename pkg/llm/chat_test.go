package llm

import (
	"encoding/json"
	"testing"
)

func TestContentText(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]struct {
		text    string
		results bool
	}{
		`"hello"`: {"hello", false},
		`[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"input_text","text":"b"}]`: {"a\nb", false},
		`[{"type":"text","text":7},{"type":"text","text":"kept"}]`:                                                   {"kept", false},
		`[{"type":"tool_result","tool_use_id":"t","content":"r"}]`:                                                   {"", true},
		`null`: {"", false},
		``:     {"", false},
	} {
		text, results := ContentText(json.RawMessage(raw))
		if text != want.text || results != want.results {
			t.Errorf("%s → %q %v, want %q %v", raw, text, results, want.text, want.results)
		}
	}
}

// The upstream body keeps the client's parameters verbatim, swaps in the model, the
// chain's messages and the tools, and drops what makes no sense upstream.
func TestBody(t *testing.T) {
	t.Parallel()
	req, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.25,
		"tool_choice":"auto","parallel_tool_calls":true,"stream":true,"stream_options":{"include_usage":true},
		"tools":[{"type":"function","function":{"name":"get_stock"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if names := req.ToolNames(); len(names) != 1 || names[0] != "get_stock" {
		t.Fatalf("tool names %v", names)
	}
	msgs := []json.RawMessage{json.RawMessage(`{"role":"user","content":"hi"}`)}
	var with, without map[string]json.RawMessage
	b, _ := req.Body("up", msgs, req.Tools)
	if err := json.Unmarshal(b, &with); err != nil {
		t.Fatalf("body is not JSON: %s", b)
	}
	if string(with["model"]) != `"up"` || string(with["temperature"]) != `0.25` || string(with["tool_choice"]) != `"auto"` ||
		with["stream_options"] != nil || with["stream"] != nil || len(with["tools"]) == 0 {
		t.Errorf("body with tools: %s", b)
	}
	b, _ = req.Body("up", msgs, nil)
	json.Unmarshal(b, &without)
	if without["tools"] != nil || without["tool_choice"] != nil || without["parallel_tool_calls"] != nil {
		t.Errorf("body without tools keeps tool settings: %s", b)
	}
	// A stored request decodes to the same tool names without re-validation.
	stored, err := DecodeChatRequest([]byte(`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}}]}`))
	if err != nil || len(stored.ToolNames()) != 1 || stored.ToolNames()[0] != "f" {
		t.Errorf("decoded %v %v", stored, err)
	}
}
