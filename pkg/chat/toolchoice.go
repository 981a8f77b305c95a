package chat

import (
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// hopRequest is a copy of the job's request for hop h's model call, which the caller
// fills in; when the request forces web_search (a Responses tool_choice of web_search)
// and this is the first hop, which offers it, its tool_choice names web_search. Later
// hops leave the model free to answer from what it found.
func hopRequest(req *wire.Request, h int, offered bool) *wire.Request {
	r := *req
	if h == 0 && offered && req.Search != nil && req.Search.Forced {
		r.ToolChoice = &wire.ToolChoice{Mode: "tool", Name: intent.ToolName}
	}
	return &r
}
