// Package openresponses holds the rules of the Open Responses specification
// (openresponses.org: its OpenAPI document's ResponseResource and streaming event
// schemas, and its compliance suite's checks) as Go checks, written for this project,
// that the fleet's Responses answers and stream events are tested against.
package openresponses

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Event is one server-sent event: its name and its JSON data (nil for a comment).
type Event struct {
	Name string
	Data []byte
}

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

// ResponseResourceFields are the required fields of a ResponseResource and the types
// each may take.
var ResponseResourceFields = map[string][]kind{
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

// Nested are the required fields of objects inside a response, by where they are.
var Nested = map[string]map[string][]kind{
	"usage":                 {"input_tokens": {kInteger}, "output_tokens": {kInteger}, "total_tokens": {kInteger}, "input_tokens_details": {kObject}, "output_tokens_details": {kObject}},
	"usage.input_details":   {"cached_tokens": {kInteger}},
	"usage.output_details":  {"reasoning_tokens": {kInteger}},
	"reasoning":             {"effort": {kString, kNull}, "summary": {kString, kNull}},
	"text":                  {"format": {kObject}},
	"error":                 {"code": {kString}, "message": {kString}},
	"incomplete_details":    {"reason": {kString}},
	"item.message":          {"type": {kString}, "id": {kString}, "status": {kString}, "role": {kString}, "content": {kArray}},
	"item.web_search_call":  {"type": {kString}, "id": {kString}, "status": {kString}},
	"action":                {"type": {kString}},
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

// Fits reports whether v has one of kinds.
func Fits(v any, kinds []kind) bool {
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
		case !Fits(v, fields[k]):
			errs = append(errs, fmt.Sprintf("%s.%s: %s, want %v", where, k, kindOf(v), fields[k]))
		}
	}
	return errs
}

// checkItem checks an output item (and its content) of a known type.
func checkItem(where string, it map[string]any) []string {
	switch it["type"] {
	case "message":
		errs := checkFields(where, it, Nested["item.message"])
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
		return checkFields(where, it, Nested["item.function_call"])
	case "web_search_call":
		errs := checkFields(where, it, Nested["item.web_search_call"])
		if s, _ := it["status"].(string); !contains(webSearchStatuses, s) {
			errs = append(errs, fmt.Sprintf("%s.status %q is not one of %v", where, s, webSearchStatuses))
		}
		if a, ok := it["action"].(map[string]any); ok {
			errs = append(errs, checkFields(where+".action", a, Nested["action"])...)
		}
		return errs
	}
	return nil // other items: outside the spec's item list
}

var webSearchStatuses = []string{"in_progress", "searching", "completed", "failed"}

func checkContent(where string, c map[string]any) []string {
	if c["type"] != "output_text" {
		return nil
	}
	errs := checkFields(where, c, Nested["content.output_text"])
	anns, _ := c["annotations"].([]any)
	for i, a := range anns {
		am, _ := a.(map[string]any)
		errs = append(errs, checkFields(fmt.Sprintf("%s.annotations[%d]", where, i), am, Nested["annotation"])...)
	}
	return errs
}

// CheckResponse checks a ResponseResource: every required field with its type,
// and the items and content parts of the types the specification lists.
func CheckResponse(where string, o map[string]any) []string {
	errs := checkFields(where, o, ResponseResourceFields)
	if o["object"] != "response" {
		errs = append(errs, fmt.Sprintf("%s.object = %v", where, o["object"]))
	}
	if t, _ := o["truncation"].(string); t != "auto" && t != "disabled" {
		errs = append(errs, fmt.Sprintf("%s.truncation = %q", where, t))
	}
	for _, f := range []string{"usage", "reasoning", "text", "error", "incomplete_details"} {
		if m, ok := o[f].(map[string]any); ok {
			errs = append(errs, checkFields(where+"."+f, m, Nested[f])...)
			if f == "usage" {
				in, _ := m["input_tokens_details"].(map[string]any)
				out, _ := m["output_tokens_details"].(map[string]any)
				errs = append(errs, checkFields(where+".usage.input_tokens_details", in, Nested["usage.input_details"])...)
				errs = append(errs, checkFields(where+".usage.output_tokens_details", out, Nested["usage.output_details"])...)
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
			errs = append(errs, checkFields(fmt.Sprintf("%s.tools[%d]", where, i), tm, Nested["tool.function"])...)
		}
	}
	output, _ := o["output"].([]any)
	for i, it := range output {
		im, _ := it.(map[string]any)
		errs = append(errs, checkItem(fmt.Sprintf("%s.output[%d]", where, i), im)...)
	}
	return errs
}

// CheckEvents checks a stream: every event's fields by its type, sequence numbers
// counting from 0, a snapshot in each response.* event, and it ends in one terminal
// event.
func CheckEvents(evs []Event) []string {
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
		errs = append(errs, checkFields(where, o, Nested["event"])...)
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
			errs = append(errs, CheckResponse(where+".response", r)...)
			if typ == "response.completed" || typ == "response.failed" || typ == "response.incomplete" {
				terminal++
			}
		case "response.output_item.added", "response.output_item.done":
			errs = append(errs, checkFields(where, o, Nested["event.output_item"])...)
			if it, ok := o["item"].(map[string]any); ok && typ == "response.output_item.done" {
				errs = append(errs, checkItem(where+".item", it)...)
			}
		case "response.content_part.added", "response.content_part.done":
			errs = append(errs, checkFields(where, o, Nested["event.content_part"])...)
		case "response.output_text.delta":
			errs = append(errs, checkFields(where, o, Nested["event.text_delta"])...)
		case "response.output_text.done":
			errs = append(errs, checkFields(where, o, Nested["event.text_done"])...)
		case "response.output_text.annotation.added":
			errs = append(errs, checkFields(where, o, Nested["event.annotation"])...)
			a, _ := o["annotation"].(map[string]any)
			errs = append(errs, checkFields(where+".annotation", a, Nested["annotation"])...)
		case "response.function_call_arguments.delta":
			errs = append(errs, checkFields(where, o, Nested["event.arguments_delta"])...)
		case "response.function_call_arguments.done":
			errs = append(errs, checkFields(where, o, Nested["event.arguments_done"])...)
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
