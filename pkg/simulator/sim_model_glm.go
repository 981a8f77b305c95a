package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/internal/fixtures"
)

// Zhipu GLM's own search, played on /v1/chat/completions for a request that declares
// the {"type":"web_search","web_search":{…}} tool (WIRE_FORMATS.md §4a): a user turn
// that asks for something gets a GLM answer in the shape of internal/fixtures/zhipu
// grounded on pages generated from the user's text (the tool's count, domain and
// recency filters honoured): sentences with "[ref_N]" markers, marked as simulated,
// and the top-level web_search array of results next to choices; "sim:fixture" gets
// the fixture's own answer. Streamed, the text arrives as chunks and the array on the
// last chunk, with finish_reason and usage (the documented default). Anything else is
// the scripted model's answer.

// glmNative answers a request that declared GLM's web_search tool with the options
// opts.
func (s *Server) glmNative(w http.ResponseWriter, r *http.Request, req chatRequest, user, id string, opts json.RawMessage) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role != "user" || !wantsSearch(user) {
		msg, finish := script(req, user, id)
		writeChat(w, r, req, user, id, msg, finish, scriptUsage(msg, 10), false)
		return
	}
	s.stats.count("model_native_search", nil, id)
	var rec map[string]any
	if strings.Contains(user, "sim:fixture") {
		rec = decodeBody(fixtures.Read("zhipu/glm-chat-finance-zh.CONSTRUCTED.json"))
		delete(rec, "_note")
		msg := rec["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		msg["content"] = simulatedPrefix + msg["content"].(string)
	} else {
		var ws any
		json.Unmarshal(opts, &ws)
		rec = decodeBody(glmChatBody(glmSearchAsk(ws, user), req.Model, simulatedPrefix))
	}
	content := jstr(jpath(rec, "choices", "0", "message", "content"))
	rec["model"] = req.Model
	if !req.Stream {
		writeJSON(w, mustJSON(rec))
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(v map[string]any) {
		v["id"], v["created"], v["model"] = rec["id"], rec["created"], req.Model
		fmt.Fprintf(w, "data: %s\n\n", mustJSON(v))
		rc.Flush()
	}
	for _, tok := range tokens(content) {
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": tok}}}})
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": "stop"}},
		"usage": rec["usage"], "web_search": rec["web_search"]})
	fmt.Fprint(w, "data: [DONE]\n\n")
	rc.Flush()
}
