// Package openresponses holds the rules of the Open Responses specification
// (openresponses.org: its OpenAPI document's ResponseResource and streaming event
// schemas, and its compliance suite's checks) as Go checks, written for this project,
// that the fleet's Responses answers and stream events are tested against.
package openresponses

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
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
	"usage":                     {"input_tokens": {kInteger}, "output_tokens": {kInteger}, "total_tokens": {kInteger}, "input_tokens_details": {kObject}, "output_tokens_details": {kObject}},
	"usage.input_details":       {"cached_tokens": {kInteger}},
	"usage.output_details":      {"reasoning_tokens": {kInteger}},
	"reasoning":                 {"effort": {kString, kNull}, "summary": {kString, kNull}},
	"text":                      {"format": {kObject}},
	"error":                     {"code": {kString}, "message": {kString}},
	"incomplete_details":        {"reason": {kString}},
	"item.message":              {"type": {kString}, "id": {kString}, "status": {kString}, "role": {kString}, "content": {kArray}},
	"item.web_search_call":      {"type": {kString}, "id": {kString}, "status": {kString}},
	"action":                    {"type": {kString}},
	"item.function_call":        {"type": {kString}, "id": {kString}, "call_id": {kString}, "name": {kString}, "arguments": {kString}, "status": {kString}},
	"content.output_text":       {"type": {kString}, "text": {kString}, "annotations": {kArray}, "logprobs": {kArray}},
	"content.text":              {"type": {kString}, "text": {kString}},
	"content.refusal":           {"type": {kString}, "refusal": {kString}},
	"item.function_call_output": {"type": {kString}, "id": {kString}, "call_id": {kString}, "output": {kString, kArray}, "status": {kString}},
	"item.reasoning":            {"type": {kString}, "id": {kString}, "summary": {kArray}},
	"item.compaction":           {"type": {kString}, "id": {kString}, "encrypted_content": {kString}},
	"source.url":                {"type": {kString}, "url": {kString}},
	"tool.web_search":           {"type": {kString}},
	"annotation":                {"type": {kString}, "url": {kString}, "start_index": {kInteger}, "end_index": {kInteger}, "title": {kString}},
	"tool.function":             {"type": {kString}, "name": {kString}, "description": {kString, kNull}, "parameters": {kObject, kNull}, "strict": {kBool, kNull}},
	"event":                     {"type": {kString}, "sequence_number": {kInteger}},
	"event.output_item":         {"output_index": {kInteger}, "item": {kObject}},
	"event.content_part":        {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "part": {kObject}},
	"event.text_delta":          {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "delta": {kString}},
	"event.text_done":           {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "text": {kString}},
	"event.annotation":          {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "annotation_index": {kInteger}, "annotation": {kObject}},
	"event.arguments_delta":     {"item_id": {kString}, "output_index": {kInteger}, "delta": {kString}},
	"event.arguments_done":      {"item_id": {kString}, "output_index": {kInteger}, "arguments": {kString}},
	"event.refusal_delta":       {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "delta": {kString}},
	"event.refusal_done":        {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "refusal": {kString}},
	"event.summary_part":        {"item_id": {kString}, "output_index": {kInteger}, "summary_index": {kInteger}, "part": {kObject}},
	"event.summary_delta":       {"item_id": {kString}, "output_index": {kInteger}, "summary_index": {kInteger}, "delta": {kString}},
	"event.summary_done":        {"item_id": {kString}, "output_index": {kInteger}, "summary_index": {kInteger}, "text": {kString}},
	"event.reasoning_delta":     {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "delta": {kString}},
	"event.reasoning_done":      {"item_id": {kString}, "output_index": {kInteger}, "content_index": {kInteger}, "text": {kString}},
	"event.tool_progress":       {"item_id": {kString}, "output_index": {kInteger}},
	"event.error":               {"error": {kObject}},
	"event.error_payload":       {"type": {kString}, "code": {kString, kNull}, "message": {kString}, "param": {kString, kNull}},
}

var (
	messageStatuses = []string{"in_progress", "completed", "incomplete"}
	messageRoles    = []string{"user", "assistant", "system", "developer"}
	// contentTypes are the content parts a message, a content_part event or a
	// reasoning summary may hold.
	contentTypes = []string{"input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal", "input_image", "input_file", "input_video"}
	// toolTypes are the tools a response may list; toolChoices the tool_choice
	// strings and objectChoices the types of a tool_choice object.
	toolTypes     = []string{"function", "web_search", "file_search"}
	toolChoices   = []string{"none", "auto", "required"}
	objectChoices = []string{"function", "file_search", "web_search", "web_search_preview", "allowed_tools"}
	actionTypes   = []string{"search", "open_page", "find_in_page"}
)

// StreamEventTypes are the streaming events the specification defines; a stream
// sends no other.
var StreamEventTypes = []string{
	"response.created", "response.queued", "response.in_progress", "response.completed", "response.failed", "response.incomplete",
	"response.output_item.added", "response.output_item.done", "response.content_part.added", "response.content_part.done",
	"response.output_text.delta", "response.output_text.done", "response.refusal.delta", "response.refusal.done",
	"response.function_call_arguments.delta", "response.function_call_arguments.done",
	"response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
	"response.reasoning.delta", "response.reasoning.done",
	"response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
	"response.output_text.annotation.added",
	"response.file_search_call.in_progress", "response.file_search_call.searching", "response.file_search_call.completed",
	"response.web_search_call.in_progress", "response.web_search_call.searching", "response.web_search_call.completed",
	"error",
}

// eventFields names, for each streaming event type with fields of its own, the
// Nested entry that lists them.
var eventFields = map[string]string{
	"response.output_item.added":             "event.output_item",
	"response.output_item.done":              "event.output_item",
	"response.content_part.added":            "event.content_part",
	"response.content_part.done":             "event.content_part",
	"response.output_text.delta":             "event.text_delta",
	"response.output_text.done":              "event.text_done",
	"response.output_text.annotation.added":  "event.annotation",
	"error":                                  "event.error",
	"response.refusal.delta":                 "event.refusal_delta",
	"response.refusal.done":                  "event.refusal_done",
	"response.function_call_arguments.delta": "event.arguments_delta",
	"response.function_call_arguments.done":  "event.arguments_done",
	"response.reasoning_summary_part.added":  "event.summary_part",
	"response.reasoning_summary_part.done":   "event.summary_part",
	"response.reasoning_summary_text.delta":  "event.summary_delta",
	"response.reasoning_summary_text.done":   "event.summary_done",
	"response.reasoning.delta":               "event.reasoning_delta",
	"response.reasoning.done":                "event.reasoning_done",
	"response.file_search_call.in_progress":  "event.tool_progress",
	"response.file_search_call.searching":    "event.tool_progress",
	"response.file_search_call.completed":    "event.tool_progress",
	"response.web_search_call.in_progress":   "event.tool_progress",
	"response.web_search_call.searching":     "event.tool_progress",
	"response.web_search_call.completed":     "event.tool_progress",
}

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
	for _, k := range slices.Sorted(maps.Keys(fields)) {
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
		errs = append(errs, oneOf(where+".status", it["status"], messageStatuses)...)
		errs = append(errs, oneOf(where+".role", it["role"], messageRoles)...)
		content, _ := it["content"].([]any)
		for i, c := range content {
			cp, _ := c.(map[string]any)
			errs = append(errs, checkContent(fmt.Sprintf("%s.content[%d]", where, i), cp)...)
		}
		return errs
	case "function_call", "function_call_output":
		errs := checkFields(where, it, Nested["item."+it["type"].(string)])
		return append(errs, oneOf(where+".status", it["status"], messageStatuses)...)
	case "reasoning":
		errs := checkFields(where, it, Nested["item.reasoning"])
		for _, f := range []string{"summary", "content"} {
			parts, _ := it[f].([]any)
			for i, c := range parts {
				cp, _ := c.(map[string]any)
				errs = append(errs, checkContent(fmt.Sprintf("%s.%s[%d]", where, f, i), cp)...)
			}
		}
		return errs
	case "web_search_call":
		errs := checkFields(where, it, Nested["item.web_search_call"])
		errs = append(errs, oneOf(where+".status", it["status"], webSearchStatuses)...)
		if a, ok := it["action"].(map[string]any); ok {
			errs = append(errs, checkFields(where+".action", a, Nested["action"])...)
			errs = append(errs, oneOf(where+".action.type", a["type"], actionTypes)...)
			if q, ok := a["query"]; ok && !Fits(q, []kind{kString, kNull}) {
				errs = append(errs, fmt.Sprintf("%s.action.query: %s", where, kindOf(q)))
			}
			sources, _ := a["sources"].([]any)
			for i, src := range sources {
				sm, _ := src.(map[string]any)
				if sm["type"] == "api" {
					errs = append(errs, checkFields(fmt.Sprintf("%s.action.sources[%d]", where, i), sm, map[string][]kind{"type": {kString}, "name": {kString}})...)
					continue
				}
				errs = append(errs, checkFields(fmt.Sprintf("%s.action.sources[%d]", where, i), sm, Nested["source.url"])...)
			}
		}
		return errs
	case "compaction":
		return checkFields(where, it, Nested["item.compaction"])
	case nil:
		return []string{where + ".type: missing"}
	}
	return []string{fmt.Sprintf("%s.type %q is not an output item type of the specification", where, it["type"])}
}

// oneOf reports v when it is not one of the strings in list.
func oneOf(where string, v any, list []string) []string {
	if s, ok := v.(string); ok && slices.Contains(list, s) {
		return nil
	}
	return []string{fmt.Sprintf("%s %v is not one of %v", where, v, list)}
}

var webSearchStatuses = []string{"in_progress", "searching", "completed", "incomplete", "failed"}

// checkContent checks a content part: one of the specification's types, with the
// fields its type requires.
func checkContent(where string, c map[string]any) []string {
	switch c["type"] {
	case "output_text":
	case "text", "summary_text", "reasoning_text", "input_text":
		return checkFields(where, c, Nested["content.text"])
	case "refusal":
		return checkFields(where, c, Nested["content.refusal"])
	default:
		return oneOf(where+".type", c["type"], contentTypes)
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
		tw := fmt.Sprintf("%s.tools[%d]", where, i)
		errs = append(errs, oneOf(tw+".type", tm["type"], toolTypes)...)
		switch tm["type"] {
		case "function":
			errs = append(errs, checkFields(tw, tm, Nested["tool.function"])...)
		case "web_search":
			if v, ok := tm["external_web_access"]; ok && !Fits(v, []kind{kBool}) {
				errs = append(errs, tw+".external_web_access: "+string(kindOf(v)))
			}
		}
	}
	switch tc := o["tool_choice"].(type) {
	case string:
		errs = append(errs, oneOf(where+".tool_choice", tc, toolChoices)...)
	case map[string]any:
		errs = append(errs, oneOf(where+".tool_choice.type", tc["type"], objectChoices)...)
		if tc["type"] == "allowed_tools" {
			errs = append(errs, checkFields(where+".tool_choice", tc, map[string][]kind{"tools": {kArray}, "mode": {kString}})...)
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
		if !slices.Contains(StreamEventTypes, typ) {
			errs = append(errs, where+": not a streaming event of the specification")
		}
		if e.Name != typ {
			errs = append(errs, fmt.Sprintf("%s: SSE event name %q", where, e.Name))
		}
		if n, _ := o["sequence_number"].(float64); int(n) != next {
			errs = append(errs, fmt.Sprintf("%s: sequence_number %v, want %d", where, o["sequence_number"], next))
		}
		next++
		if k, ok := eventFields[typ]; ok {
			errs = append(errs, checkFields(where, o, Nested[k])...)
		}
		switch typ {
		case "response.created", "response.queued", "response.in_progress", "response.completed", "response.failed", "response.incomplete":
			r, _ := o["response"].(map[string]any)
			errs = append(errs, CheckResponse(where+".response", r)...)
			if typ == "response.completed" || typ == "response.failed" || typ == "response.incomplete" {
				terminal++
			}
		case "response.output_item.added", "response.output_item.done":
			if it, ok := o["item"].(map[string]any); ok {
				errs = append(errs, checkItem(where+".item", it)...)
			}
		case "response.content_part.added", "response.content_part.done", "response.reasoning_summary_part.added", "response.reasoning_summary_part.done":
			if p, ok := o["part"].(map[string]any); ok {
				errs = append(errs, checkContent(where+".part", p)...)
			}
		case "error":
			if p, ok := o["error"].(map[string]any); ok {
				errs = append(errs, checkFields(where+".error", p, Nested["event.error_payload"])...)
			}
		case "response.output_text.delta":
			if lp, ok := o["logprobs"]; ok && !Fits(lp, []kind{kArray}) {
				errs = append(errs, where+".logprobs: "+string(kindOf(lp)))
			}
		case "response.output_text.annotation.added":
			a, _ := o["annotation"].(map[string]any)
			errs = append(errs, checkFields(where+".annotation", a, Nested["annotation"])...)
		}
	}
	if terminal != 1 {
		errs = append(errs, fmt.Sprintf("%d terminal events, want 1", terminal))
	}
	return errs
}
