package openresponses

import "fmt"

// CompactResourceFields are the required fields of the CompactResource that
// POST /responses/compact answers with.
var CompactResourceFields = map[string][]kind{
	"id": {kString}, "object": {kString}, "output": {kArray}, "created_at": {kInteger}, "usage": {kObject},
}

// CheckCompaction checks a CompactResource: its fields, object "response.compaction",
// its output items (the kept messages and the compaction item) and its usage.
func CheckCompaction(where string, o map[string]any) []string {
	errs := checkFields(where, o, CompactResourceFields)
	if o["object"] != "response.compaction" {
		errs = append(errs, fmt.Sprintf("%s.object %v, want response.compaction", where, o["object"]))
	}
	out, _ := o["output"].([]any)
	for i, it := range out {
		im, _ := it.(map[string]any)
		errs = append(errs, checkItem(fmt.Sprintf("%s.output[%d]", where, i), im)...)
	}
	if u, ok := o["usage"].(map[string]any); ok {
		errs = append(errs, checkFields(where+".usage", u, Nested["usage"])...)
	}
	return errs
}

// SocketErrorFields are the required fields of a WebSocket error envelope (Open
// Responses, "WebSocket Errors"), and of its error object.
var SocketErrorFields = map[string][]kind{"type": {kString}, "status": {kInteger}, "error": {kObject}}

var socketErrorPayload = map[string][]kind{"code": {kString}, "message": {kString}}

// CheckSocketError checks an error event sent on a Responses WebSocket: type
// "error", an HTTP status, and an error whose code and message are strings (param,
// when present, a string or null).
func CheckSocketError(where string, o map[string]any) []string {
	errs := checkFields(where, o, SocketErrorFields)
	if o["type"] != "error" {
		errs = append(errs, fmt.Sprintf("%s.type %v, want error", where, o["type"]))
	}
	if st, ok := o["status"].(float64); ok && (st < 400 || st > 599) {
		errs = append(errs, fmt.Sprintf("%s.status %v is not an error status", where, st))
	}
	e, _ := o["error"].(map[string]any)
	errs = append(errs, checkFields(where+".error", e, socketErrorPayload)...)
	if p, ok := e["param"]; ok && !Fits(p, []kind{kString, kNull}) {
		errs = append(errs, fmt.Sprintf("%s.error.param: %s", where, kindOf(p)))
	}
	return errs
}
