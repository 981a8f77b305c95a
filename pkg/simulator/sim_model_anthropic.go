package simulator

import (
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// anthropicRecorded is the recorded native-search answer (vercel-web-search-nonstream.json),
// its text marked as simulated.
func anthropicRecorded(model, id string) []byte {
	msg := decodeBody(fixtures.Read("anthropic/vercel-web-search-nonstream.json"))
	msg["id"], msg["model"] = "msg_sim_"+id, model
	for _, b := range msg["content"].([]any) {
		if block := b.(map[string]any); block["type"] == "text" {
			block["text"] = "(simulated answer) " + block["text"].(string)
			break
		}
	}
	return mustJSON(msg)
}

// anthropicMessages is the scripted model as an Anthropic Messages API (POST
// /v1/messages, x-api-key and anthropic-version required): tool_use blocks with
// toolu_ ids, end_turn / tool_use stop reasons, the Messages stream events, and
// {"type":"error",…} bodies (a 529 is an overloaded_error).
func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	keyed := r.Header.Get("x-api-key") != "" && r.Header.Get("anthropic-version") != ""
	req, body, a, ok := s.playRequest(w, r, anthropic.Client, keyed, "simulator: x-api-key and anthropic-version headers are required", "simulator: messages: the conversation is empty")
	if !ok {
		return
	}
	if a.ownSearch(req.Search != nil) {
		// Anthropic's own web_search tool (web_search_20250305): a server_tool_use, its
		// web_search_tool_result and text blocks with web_search_result_location
		// citations quoting the pages (the request's domains honoured).
		s.nativeSearch(w, r, req.Stream, a.user, a.id, "anthropic/pydantic-web-search-news-stream.sse",
			func() []byte { return anthropicRecorded(req.Model, a.id) },
			func() []byte { return anthropicBody(nativeAsk(a.user, req.Search), req.Model, a.id, simulatedPrefix) }, anthropicStream)
		return
	}
	thinking, ok := s.anthropicThinking(w, body, a.user, a.id)
	if !ok {
		return
	}
	resp := a.response("msg_sim_"+a.id, req.Model, func(id string) string { return "toolu_" + strings.TrimPrefix(id, "call_") })
	if thinking != nil {
		resp.Content = append([]wire.Part{*thinking}, resp.Content...) // the thinking comes first
	}
	if !req.Stream {
		b, _ := anthropic.Client.EncodeResponse(resp)
		writeJSON(w, b)
		return
	}
	st := anthropic.Client.NewStream()
	writeEvents(w, r, streamEvents(st, resp), tokenDelay(a.user))
}
