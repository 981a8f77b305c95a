package openresponses

import (
	"encoding/json"
	"strings"
	"testing"
)

// valid is a response object with every required field, a message, a function call
// and a web search.
const valid = `{"id":"resp_1","object":"response","created_at":1,"completed_at":2,"status":"completed",
"incomplete_details":null,"model":"m","previous_response_id":null,"instructions":null,
"output":[{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q","sources":[{"type":"url","url":"https://a.example"}]}},
 {"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi [1]","annotations":[{"type":"url_citation","url":"https://a.example","start_index":3,"end_index":6,"title":"A"}],"logprobs":[]}]},
 {"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}","status":"completed"}],
"error":null,"tools":[{"type":"function","name":"f","description":null,"parameters":{"type":"object"},"strict":null},{"type":"web_search","external_web_access":false}],
"tool_choice":{"type":"web_search"},"truncation":"disabled","parallel_tool_calls":true,"text":{"format":{"type":"text"}},
"top_p":1,"presence_penalty":0,"frequency_penalty":0,"top_logprobs":0,"temperature":1,"reasoning":{"effort":null,"summary":null},
"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}},
"max_output_tokens":null,"max_tool_calls":null,"store":true,"background":false,"service_tier":"default","metadata":{},
"safety_identifier":null,"prompt_cache_key":null}`

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// Each rule catches the response that breaks it, and only that one.
func TestCheckResponse(t *testing.T) {
	if errs := CheckResponse("r", decode(t, valid)); len(errs) > 0 {
		t.Fatalf("a valid response: %v", errs)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"a field missing", `"top_logprobs":0,`, ``, "r.top_logprobs: missing"},
		{"temperature null", `"temperature":1`, `"temperature":null`, "r.temperature: null"},
		{"output_text without logprobs", `,"logprobs":[]`, ``, "content[0].logprobs: missing"},
		{"a message role", `"role":"assistant"`, `"role":"bot"`, "role bot is not one of"},
		{"a function call status", `"arguments":"{}","status":"completed"`, `"arguments":"{}","status":"done"`, "output[2].status done"},
		{"a tool without strict", `"strict":null`, `"x":null`, "r.tools[0].strict: missing"},
		{"an unknown tool", `{"type":"web_search","external_web_access":false}`, `{"type":"code_interpreter"}`, "r.tools[1].type"},
		{"a tool_choice string", `"tool_choice":{"type":"web_search"}`, `"tool_choice":"any"`, "r.tool_choice any"},
		{"a tool_choice object", `"tool_choice":{"type":"web_search"}`, `"tool_choice":{"type":"tool"}`, "r.tool_choice.type"},
		{"an action type", `"action":{"type":"search"`, `"action":{"type":"browse"`, "action.type browse"},
		{"a source without url", `{"type":"url","url":"https://a.example"}`, `{"type":"url"}`, "sources[0].url: missing"},
		{"an unknown item", `{"type":"function_call","id":"fc_1"`, `{"type":"tool_call","id":"fc_1"`, "not an output item type"},
		{"completed without completed_at", `"completed_at":2`, `"completed_at":null`, "names when it completed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(valid, c.from) {
				t.Fatalf("%q is not in the valid response", c.from)
			}
			errs := CheckResponse("r", decode(t, strings.Replace(valid, c.from, c.to, 1)))
			if !strings.Contains(strings.Join(errs, "\n"), c.want) {
				t.Errorf("errors %v, want one with %q", errs, c.want)
			}
		})
	}
}

// A stream is checked event by event: known types only, sequence numbers from 0,
// items and parts of the specification's shapes, one terminal event.
func TestCheckEvents(t *testing.T) {
	ev := func(s string) Event {
		var o struct {
			Type string `json:"type"`
		}
		json.Unmarshal([]byte(s), &o)
		return Event{Name: o.Type, Data: []byte(s)}
	}
	stream := func(middle ...string) []Event {
		evs := []Event{ev(`{"type":"response.created","sequence_number":0,"response":` + valid + `}`)}
		for _, m := range middle {
			evs = append(evs, ev(m))
		}
		return append(evs, ev(`{"type":"response.completed","sequence_number":`+string(rune('0'+len(evs)))+`,"response":`+valid+`}`))
	}
	good := stream(
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"c","name":"f","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{}"}`,
		`{"type":"response.web_search_call.searching","sequence_number":3,"item_id":"ws_1","output_index":1}`,
	)
	if errs := CheckEvents(good); len(errs) > 0 {
		t.Fatalf("a valid stream: %v", errs)
	}
	for _, c := range []struct {
		name string
		evs  []Event
		want string
	}{
		{"an unknown event", stream(`{"type":"response.thinking","sequence_number":1}`), "not a streaming event"},
		{"an added item without call_id", stream(`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","name":"f","arguments":"","status":"in_progress"}}`), "call_id: missing"},
		{"a part without logprobs", stream(`{"type":"response.content_part.added","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`), "part.logprobs: missing"},
		{"a tool progress event without item_id", stream(`{"type":"response.web_search_call.completed","sequence_number":1,"output_index":0}`), "item_id: missing"},
		{"a sequence gap", stream(`{"type":"response.output_text.delta","sequence_number":5,"item_id":"m","output_index":0,"content_index":0,"delta":"x"}`), "sequence_number 5, want 1"},
		{"no terminal event", stream()[:1], "0 terminal events"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if errs := CheckEvents(c.evs); !strings.Contains(strings.Join(errs, "\n"), c.want) {
				t.Errorf("errors %v, want one with %q", errs, c.want)
			}
		})
	}
}
