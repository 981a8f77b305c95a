package chat

import (
	"encoding/json"
	"maps"

	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/llm"
)

// forcedSearch is the tool_choice that makes a model call web_search.
var forcedSearch = json.RawMessage(`{"type":"function","function":{"name":"` + intent.ToolName + `"}}`)

// hopRequest is the request hop h's model call is built from: the job's request, or,
// when the request forces web_search (a Responses tool_choice of web_search) and this
// is the first hop, which offers it, a copy whose tool_choice names it. Later hops
// leave the model free to answer from what it found.
func hopRequest(req *llm.ChatRequest, h int, offered bool) *llm.ChatRequest {
	if h > 0 || !offered || req.Search == nil || !req.Search.Forced {
		return req
	}
	forced := *req
	forced.Extra = maps.Clone(req.Extra)
	if forced.Extra == nil {
		forced.Extra = map[string]json.RawMessage{}
	}
	forced.Extra["tool_choice"] = forcedSearch
	return &forced
}
