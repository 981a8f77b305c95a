package wire_test

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The Open Responses specification (openresponses.org) requires every field of a
// ResponseResource in every answer and in every stream snapshot (response.created,
// response.in_progress, response.completed, response.failed, response.incomplete),
// each with its type. These tests hold the fleet's Responses codec to that list.

// kind is a JSON type a field may have.
type kind string

const (
	kString  kind = "string"
	kInteger kind = "integer"
	kNumber  kind = "number"
	kBool    kind = "boolean"
	kArray   kind = "array"
	kObject  kind = "object"
	kNull    kind = "null"
	kAny     kind = "any"
)

// responseResourceFields are the required fields of a ResponseResource and the types
// each may take.
var responseResourceFields = map[string][]kind{
	"id": {kString}, "object": {kString}, "created_at": {kInteger}, "completed_at": {kInteger, kNull},
	"status": {kString}, "incomplete_details": {kObject, kNull}, "model": {kString},
	"previous_response_id": {kString, kNull}, "instructions": {kString, kNull}, "output": {kArray},
	"error": {kObject, kNull}, "tools": {kArray}, "tool_choice": {kString, kObject}, "truncation": {kString},
	"parallel_tool_calls": {kBool}, "text": {kObject}, "top_p": {kNumber}, "presence_penalty": {kNumber},
	"frequency_penalty": {kNumber}, "top_logprobs": {kInteger}, "temperature": {kNumber}, "reasoning": {kObject, kNull},
	"usage": {kObject, kNull}, "max_output_tokens": {kInteger, kNull}, "max_tool_calls": {kInteger, kNull},
	"store": {kBool}, "background": {kBool}, "service_tier": {kString}, "metadata": {kAny},
	"safety_identifier": {kString, kNull}, "prompt_cache_key": {kString, kNull},
}

// nested are the required fields of objects inside a response, by where they are.
var nested = map[string]map[string][]kind{
	"usage":                 {"input_tokens": {kInteger}, "output_tokens": {kInteger}, "total_tokens": {kInteger}, "input_tokens_details": {kObject}, "output_tokens_details": {kObject}},
	"usage.input_details":   {"cached_tokens": {kInteger}},
	"usage.output_details":  {"reasoning_tokens": {kInteger}},
	"reasoning":             {"effort": {kString, kNull}, "summary": {kString, kNull}},
	"text":                  {"format": {kObject}},
	"error":                 {"code": {kString}, "message": {kString}},
	"incomplete_details":    {"reason": {kString}},
	"item.message":          {"type": {kString}, "id": {kString}, "status": {kString}, "role": {kString}, "content": {kArray}},
	"item.function_call":    {"type": {kString}, "id": {kString}, "call_id": {kString}, "name": {kString}, "arguments": {kString}, "status": {kString}},
	"content.output_text":   {"type": {kString}, "text": {kString}, "annotations": {kArray}},
	"annotation":            {"type": {kString}, "url": {kString}, "start_index": {kInteger}, "end_index": {kInteger}, "title": {kString}},
	"tool.function":         {"type": {kString}, "name": {kString}, "description": {kString, kNull}, "parameters": {kObject, kNull}, "strict": {kBool, kNull}},
	"event":                 {"type": {kString}, "sequence_number": {kInteger}},
	"event.output_item":     {"output_index": {kInteger}, "item": {kObject}},
	"event.content_part":    {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "part": {kObject}},
	"event.text_delta":      {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "delta": {kString}},
	"event.text_done":       {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "text": {kString}},
	"event.annotation":      {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "annotation_index": {kInteger}, "annotation": {kObject}},
	"event.arguments_delta": {"item_id": {kString}, "output_index": {kInteger}, "delta": {kString}},
	"event.arguments_done":  {"item_id": {kString}, "output_index": {kInteger}, "arguments": {kString}},
}

var messageStatuses = []string{"in_progress", "completed", "incomplete"}

func kindOf(v any) kind {
	switch x := v.(type) {
	case nil:
		return kNull
	case string:
		return kString
	case bool:
		return kBool
	case float64:
		if x == math.Trunc(x) {
			return kInteger
		}
		return kNumber
	case []any:
		return kArray
	case map[string]any:
		return kObject
	}
	return kAny
}

func fits(v any, kinds []kind) bool {
	k := kindOf(v)
	for _, want := range kinds {
		if want == kAny || want == k || want == kNumber && k == kInteger {
			return true
		}
	}
	return false
}

// checkFields reports each required field of o that is missing or of the wrong type.
func checkFields(where string, o map[string]any, fields map[string][]kind) []string {
	var errs []string
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := o[k]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s.%s: missing", where, k))
		case !fits(v, fields[k]):
			errs = append(errs, fmt.Sprintf("%s.%s: %s, want %v", where, k, kindOf(v), fields[k]))
		}
	}
	return errs
}

// checkItem checks an output item (and its content) of a known type.
func checkItem(where string, it map[string]any) []string {
	switch it["type"] {
	case "message":
		errs := checkFields(where, it, nested["item.message"])
		if s, _ := it["status"].(string); !contains(messageStatuses, s) {
			errs = append(errs, fmt.Sprintf("%s.status %q is not one of %v", where, s, messageStatuses))
		}
		content, _ := it["content"].([]any)
		for i, c := range content {
			cp, _ := c.(map[string]any)
			errs = append(errs, checkContent(fmt.Sprintf("%s.content[%d]", where, i), cp)...)
		}
		return errs
	case "function_call":
		return checkFields(where, it, nested["item.function_call"])
	}
	return nil // web_search_call and other OpenAI items: outside the spec's item list
}

func checkContent(where string, c map[string]any) []string {
	if c["type"] != "output_text" {
		return nil
	}
	errs := checkFields(where, c, nested["content.output_text"])
	anns, _ := c["annotations"].([]any)
	for i, a := range anns {
		am, _ := a.(map[string]any)
		errs = append(errs, checkFields(fmt.Sprintf("%s.annotations[%d]", where, i), am, nested["annotation"])...)
	}
	return errs
}

// checkResponse checks a ResponseResource.
func checkResponse(where string, o map[string]any) []string {
	errs := checkFields(where, o, responseResourceFields)
	if o["object"] != "response" {
		errs = append(errs, fmt.Sprintf("%s.object = %v", where, o["object"]))
	}
	if t, _ := o["truncation"].(string); t != "auto" && t != "disabled" {
		errs = append(errs, fmt.Sprintf("%s.truncation = %q", where, t))
	}
	for _, f := range []string{"usage", "reasoning", "text", "error", "incomplete_details"} {
		if m, ok := o[f].(map[string]any); ok {
			errs = append(errs, checkFields(where+"."+f, m, nested[f])...)
			if f == "usage" {
				in, _ := m["input_tokens_details"].(map[string]any)
				out, _ := m["output_tokens_details"].(map[string]any)
				errs = append(errs, checkFields(where+".usage.input_tokens_details", in, nested["usage.input_details"])...)
				errs = append(errs, checkFields(where+".usage.output_tokens_details", out, nested["usage.output_details"])...)
			}
		}
	}
	if o["status"] == "completed" && kindOf(o["completed_at"]) != kInteger {
		errs = append(errs, where+".completed_at: a completed response names when it completed")
	}
	tools, _ := o["tools"].([]any)
	for i, t := range tools {
		tm, _ := t.(map[string]any)
		if tm["type"] == "function" {
			errs = append(errs, checkFields(fmt.Sprintf("%s.tools[%d]", where, i), tm, nested["tool.function"])...)
		}
	}
	output, _ := o["output"].([]any)
	for i, it := range output {
		im, _ := it.(map[string]any)
		errs = append(errs, checkItem(fmt.Sprintf("%s.output[%d]", where, i), im)...)
	}
	return errs
}

// checkEvents checks a stream: every event's fields by its type, sequence numbers
// counting from 0, a snapshot in each response.* event, and it ends in one terminal
// event.
func checkEvents(evs []wire.Event) []string {
	var errs []string
	next := 0
	terminal := 0
	for i, e := range evs {
		if e.Data == nil {
			continue // a comment (keep-alive)
		}
		var o map[string]any
		if err := json.Unmarshal(e.Data, &o); err != nil {
			errs = append(errs, fmt.Sprintf("event %d: %v", i, err))
			continue
		}
		typ, _ := o["type"].(string)
		where := fmt.Sprintf("event %d (%s)", i, typ)
		errs = append(errs, checkFields(where, o, nested["event"])...)
		if e.Name != typ {
			errs = append(errs, fmt.Sprintf("%s: SSE event name %q", where, e.Name))
		}
		if n, _ := o["sequence_number"].(float64); int(n) != next {
			errs = append(errs, fmt.Sprintf("%s: sequence_number %v, want %d", where, o["sequence_number"], next))
		}
		next++
		switch typ {
		case "response.created", "response.queued", "response.in_progress", "response.completed", "response.failed", "response.incomplete":
			r, _ := o["response"].(map[string]any)
			errs = append(errs, checkResponse(where+".response", r)...)
			if typ == "response.completed" || typ == "response.failed" || typ == "response.incomplete" {
				terminal++
			}
		case "response.output_item.added", "response.output_item.done":
			errs = append(errs, checkFields(where, o, nested["event.output_item"])...)
			if it, ok := o["item"].(map[string]any); ok && typ == "response.output_item.done" {
				errs = append(errs, checkItem(where+".item", it)...)
			}
		case "response.content_part.added", "response.content_part.done":
			errs = append(errs, checkFields(where, o, nested["event.content_part"])...)
		case "response.output_text.delta":
			errs = append(errs, checkFields(where, o, nested["event.text_delta"])...)
		case "response.output_text.done":
			errs = append(errs, checkFields(where, o, nested["event.text_done"])...)
		case "response.output_text.annotation.added":
			errs = append(errs, checkFields(where, o, nested["event.annotation"])...)
			a, _ := o["annotation"].(map[string]any)
			errs = append(errs, checkFields(where+".annotation", a, nested["annotation"])...)
		case "response.function_call_arguments.delta":
			errs = append(errs, checkFields(where, o, nested["event.arguments_delta"])...)
		case "response.function_call_arguments.done":
			errs = append(errs, checkFields(where, o, nested["event.arguments_done"])...)
		}
	}
	if terminal != 1 {
		errs = append(errs, fmt.Sprintf("%d terminal events, want 1", terminal))
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// conformanceRequest sets every setting a response echoes.
const conformanceRequest = `{"model":"m","input":"Weather in Paris?","instructions":"Be brief.",
 "tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
          {"type":"web_search","search_context_size":"low"}],
 "tool_choice":{"type":"function","name":"get_weather"},"temperature":0.2,"top_p":0.9,"max_output_tokens":300,
 "max_tool_calls":2,"store":false,"metadata":{"k":"v"},"service_tier":"auto","safety_identifier":"u-1",
 "prompt_cache_key":"pk","presence_penalty":0,"frequency_penalty":0,"top_logprobs":0,"truncation":"disabled",
 "reasoning":{"effort":"low"},"parallel_tool_calls":false}`

// responseStates are answers in every state a response object is rendered in.
func responseStates() map[string]*wire.Response {
	created := time.Unix(1700000000, 0)
	_, final := growing("Paris is sunny [1] today.")
	final.ID, final.JobID, final.Finished = "resp_1", "resp_1", created.Add(3*time.Second)
	withCall := *final
	withCall.Content = append(append([]wire.Part(nil), final.Content...),
		wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}})
	withCall.Stop = wire.StopToolUse
	incomplete := *final
	incomplete.Stop = wire.StopMaxTokens
	base := wire.Response{ID: "resp_1", JobID: "resp_1", Model: "m", Created: created}
	queued, running := base, base
	queued.Status, running.Status = wire.StatusQueued, wire.StatusInProgress
	failed := base
	failed.Status, failed.Error = wire.StatusFailed, &wire.Error{Status: 502, Type: "upstream_error", Message: "the model's provider failed"}
	return map[string]*wire.Response{"completed": final, "tool call": &withCall, "incomplete": &incomplete,
		"queued": &queued, "in progress": &running, "failed": &failed}
}

// Every answer, in every state, defaults or echoed settings, has every required field
// with its type.
func TestResponsesAnswersHaveEveryRequiredField(t *testing.T) {
	t.Parallel()
	for _, echo := range []map[string]json.RawMessage{nil, wire.ResponsesEcho([]byte(conformanceRequest))} {
		for name, r := range responseStates() {
			r.Echo = echo
			b, err := wire.Responses.EncodeResponse(r)
			if err != nil {
				t.Fatal(err)
			}
			var o map[string]any
			if err := json.Unmarshal(b, &o); err != nil {
				t.Fatal(err)
			}
			for _, e := range checkResponse(name, o) {
				t.Errorf("echo %v: %s", echo != nil, e)
			}
		}
	}
}

// Every stream, ending in each way, sends events of the spec's shapes, and every
// snapshot has every required field.
func TestResponsesStreamEventsConform(t *testing.T) {
	t.Parallel()
	for _, echo := range []map[string]json.RawMessage{nil, wire.ResponsesEcho([]byte(conformanceRequest))} {
		stages, final := growing("Paris is sunny [1][2] today.")
		final.Echo = echo
		states := responseStates()
		for _, end := range []string{"completed", "tool call", "incomplete", "failed"} {
			st := wire.Responses.NewStream()
			start := *stages[0]
			start.Echo = echo
			evs := st.Start(&start)
			for _, s := range stages {
				evs = append(evs, st.Update(s)...)
			}
			switch end {
			case "failed":
				evs = append(evs, st.Fail(&start, &wire.Error{Status: 502, Message: "the model's provider failed"})...)
			case "completed":
				evs = append(evs, st.Finish(final)...)
			default:
				r := *states[end]
				r.Echo = echo
				evs = append(evs, st.Finish(&r)...)
			}
			for _, e := range checkEvents(evs) {
				t.Errorf("%s (echo %v): %s", end, echo != nil, e)
			}
		}
	}
}

// A response repeats the request's settings as the client sent them (tools with their
// optional fields, tool_choice, instructions, sampling, limits, store), and the
// official SDK reads them.
func TestResponsesEchoTheRequest(t *testing.T) {
	t.Parallel()
	if _, err := wire.Responses.DecodeRequest([]byte(conformanceRequest)); err != nil {
		t.Fatal(err)
	}
	r := responseStates()["completed"]
	r.Echo = wire.ResponsesEcho([]byte(conformanceRequest))
	b, err := wire.Responses.EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	var resp responses.Response
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Instructions.OfString != "Be brief." || resp.Temperature != 0.2 || resp.TopP != 0.9 || resp.MaxOutputTokens != 300 || resp.MaxToolCalls != 2 {
		t.Errorf("settings not echoed: instructions %q temperature %v top_p %v max_output_tokens %d max_tool_calls %d",
			resp.Instructions.OfString, resp.Temperature, resp.TopP, resp.MaxOutputTokens, resp.MaxToolCalls)
	}
	if resp.ToolChoice.Name != "get_weather" || resp.ParallelToolCalls || resp.ServiceTier != "default" || resp.SafetyIdentifier != "u-1" || resp.PromptCacheKey != "pk" {
		t.Errorf("tool_choice %+v parallel %v tier %q safety %q cache key %q", resp.ToolChoice, resp.ParallelToolCalls, resp.ServiceTier, resp.SafetyIdentifier, resp.PromptCacheKey)
	}
	if len(resp.Tools) != 2 || resp.Tools[0].Name != "get_weather" || resp.Tools[1].Type != "web_search" || resp.Tools[1].SearchContextSize != "low" {
		t.Errorf("tools = %s", resp.JSON.Tools.Raw())
	}
	if resp.Reasoning.Effort != "low" || resp.CompletedAt != float64(r.Finished.Unix()) || resp.Metadata["k"] != "v" {
		t.Errorf("reasoning %+v completed_at %v metadata %v", resp.Reasoning, resp.CompletedAt, resp.Metadata)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(b, &raw)
	if string(raw["store"]) != "false" {
		t.Errorf("store = %s, want the request's false", raw["store"])
	}
	// Without settings, the defaults: numbers, not nulls.
	r.Echo = nil
	b, _ = wire.Responses.EncodeResponse(r)
	json.Unmarshal(b, &raw)
	for k, want := range map[string]string{"temperature": "1", "top_p": "1", "tool_choice": `"auto"`, "tools": "[]", "instructions": "null", "store": "true", "service_tier": `"default"`} {
		if string(raw[k]) != want {
			t.Errorf("default %s = %s, want %s", k, raw[k], want)
		}
	}
}

// The settings a response object repeats are validated like the rest of the request.
func TestResponsesRefusesMalformedSettings(t *testing.T) {
	t.Parallel()
	for field, v := range map[string]string{"max_tool_calls": "0", "top_logprobs": "21", "presence_penalty": `"x"`, "service_tier": `"gold"`,
		"truncation": `"middle"`, "store": `"yes"`, "safety_identifier": `"` + strings.Repeat("x", 65) + `"`, "metadata": `{"k":1}`} {
		body := fmt.Sprintf(`{"model":"m","input":"hi",%q:%s}`, field, v)
		_, err := wire.Responses.DecodeRequest([]byte(body))
		if e := wire.AsError(err); err == nil || e.Status != 400 || e.Param != field {
			t.Errorf("%s=%s: %v", field, v, err)
		}
	}
}

// max_tool_calls bounds the server tools the fleet runs; a tool_choice of web_search
// forces the first model call to search.
func TestResponsesToolLimitsAndForcedSearch(t *testing.T) {
	t.Parallel()
	req, err := wire.Responses.DecodeRequest([]byte(`{"model":"m","input":"hi","max_tool_calls":3,"tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Search == nil || req.Search.MaxUses != 3 || req.Search.MaxFetches != 3 || !req.Search.Forced || !req.Search.Requested {
		t.Fatalf("search = %+v", req.Search)
	}
	for _, n := range req.AllNotes() {
		if strings.Contains(n, "tool_choice") {
			t.Errorf("a forced web_search is honoured, noted %q", n)
		}
	}
	req, err = wire.Responses.DecodeRequest([]byte(`{"model":"m","input":"hi","max_tool_calls":2,"tools":[{"type":"web_search","max_uses":5}]}`))
	if err != nil || req.Search.MaxUses != 2 {
		t.Fatalf("max_tool_calls 2 under max_uses 5: %+v %v", req.Search, err)
	}
}
