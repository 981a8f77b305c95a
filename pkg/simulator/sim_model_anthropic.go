package simulator

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// anthropicNative answers a request that declared Anthropic's own web_search tool
// (web_search_20250305) with one search for the user's text: a server_tool_use, its
// web_search_tool_result of pages generated from the text (the request's allowed and
// blocked domains honoured), text blocks with web_search_result_location citations
// quoting them, usage.server_tool_use.web_search_requests 1, the text marked as
// simulated; streamed, the same answer as Messages stream events. "sim:fixture" in the
// text answers with the recordings instead (vercel-web-search-nonstream.json, its text
// marked; streamed, pydantic-web-search-news-stream.sse as it was).
func (s *Server) anthropicNative(w http.ResponseWriter, r *http.Request, req *wire.Request, user, id string) {
	s.stats.count("model_native_search", nil, id)
	if strings.Contains(user, "sim:fixture") {
		anthropicRecorded(w, req, id)
		return
	}
	body := anthropicBody(nativeAsk(user, req.Search), req.Model, id, simulatedPrefix)
	if req.Stream {
		writeEvents(w, r, anthropicStream(body), tokenDelay(user))
		return
	}
	writeJSON(w, body)
}

// anthropicRecorded answers with the recorded native-search answers.
func anthropicRecorded(w http.ResponseWriter, req *wire.Request, id string) {
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(fixtures.Read("anthropic/pydantic-web-search-news-stream.sse"))
		return
	}
	var msg map[string]any
	json.Unmarshal(fixtures.Read("anthropic/vercel-web-search-nonstream.json"), &msg)
	msg["id"], msg["model"] = "msg_sim_"+id, req.Model
	for _, b := range msg["content"].([]any) {
		if block := b.(map[string]any); block["type"] == "text" {
			block["text"] = "(simulated answer) " + block["text"].(string)
			break
		}
	}
	b, _ := json.Marshal(msg)
	writeJSON(w, b)
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
		s.anthropicNative(w, r, req, a.user, a.id)
		return
	}
	thinking, ok := s.anthropicThinking(w, body, a.user, a.id)
	if !ok {
		return
	}
	resp := withReasoning(a.response("msg_sim_"+a.id, req.Model, func(id string) string { return "toolu_" + strings.TrimPrefix(id, "call_") }), thinking)
	if !req.Stream {
		b, _ := anthropic.Client.EncodeResponse(resp)
		writeJSON(w, b)
		return
	}
	st := anthropic.Client.NewStream()
	writeEvents(w, r, streamEvents(st, resp), tokenDelay(a.user))
}
