package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A Responses request is small on the wire but may name much more: the conversation of
// previous_response_id, item_references, input_file parts by file_id. What it names is
// bounded while it is resolved (resolveResponses), before anything is read that would
// pass the bound and before the job is built or charged: the resolved request may
// have at most MaxBody bytes (FLEET_MAX_BODY_BYTES, the bound of a body sent whole),
// at most maxItemReferences item_references and at most maxFileIDs input_file parts
// by file_id. A request past one is refused with 413 request_too_large, in the
// Responses error shape, naming the limit. The same holds for a WebSocket turn, which
// is resolved the same way.

const (
	maxItemReferences = 64
	maxFileIDs        = 16
)

// expansion is what a request resolved so far.
type expansion struct {
	limit int64 // bytes the resolved request may have
	size  int64 // bytes so far
}

// newExpansion counts a request's body and refuses one with more item_references or
// input_file parts by file_id in its input items than a request may have.
func newExpansion(limit int64, body []byte, items []json.RawMessage) (*expansion, *wire.Error) {
	x := &expansion{limit: limit, size: int64(len(body))}
	refs, files := 0, 0
	for _, it := range items {
		if _, ok := itemReference(it); ok {
			refs++
		}
		files += bytes.Count(it, []byte(`"file_id"`)) // at most one per part; a bound, not a count
	}
	switch {
	case refs > maxItemReferences:
		return nil, expansionTooLarge("input", fmt.Sprintf("A request may have at most %d item_reference items.", maxItemReferences))
	case files > maxFileIDs:
		return nil, expansionTooLarge("input", fmt.Sprintf("A request may have at most %d input_file parts by file_id.", maxFileIDs))
	}
	return x, nil
}

// itemReference is the id an item_reference input item names. Its type may be left
// out: then it is an id alone.
func itemReference(it json.RawMessage) (id string, ok bool) {
	var head struct {
		Type    string          `json:"type"`
		ID      string          `json:"id"`
		Role    json.RawMessage `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(it, &head)
	return head.ID, head.Type == "item_reference" || head.Type == "" && head.ID != "" && head.Role == nil && head.Content == nil
}

// add counts n more bytes of param's resolution.
func (x *expansion) add(param string, n int64) *wire.Error {
	x.size += n
	if x.size > x.limit {
		return expansionTooLarge(param, fmt.Sprintf("The request with what it names resolved (previous_response_id, item_reference, input_file by file_id) exceeds the limit of %d bytes.", x.limit))
	}
	return nil
}

// addItems counts items, param's resolution.
func (x *expansion) addItems(param string, items []json.RawMessage) *wire.Error {
	for _, it := range items {
		if e := x.add(param, int64(len(it))); e != nil {
			return e
		}
	}
	return nil
}

func expansionTooLarge(param, msg string) *wire.Error {
	return &wire.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large", Param: param, Message: msg}
}
