package simulator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Moonshot Kimi's own search, played on /v1/chat/completions for a request that
// declares the builtin function {"type":"builtin_function","function":{"name":
// "$web_search"}} (WIRE_FORMATS.md §5), from the recorded round trip in
// internal/fixtures/moonshot:
//
//   - A user turn that asks for something (wantsSearch) gets the recorded round-1
//     answer: finish_reason "tool_calls", content "", one builtin_function call of
//     $web_search whose arguments carry a search_id (derived from the user's text,
//     so the echo can be checked) and the search's token count.
//   - The echo — the assistant message sent back with a "tool" message whose content
//     is that arguments string verbatim — gets the final answer in the recorded shape
//     (markdown links, no citation fields): pages generated from the user's text, each
//     a linked title and a quote, marked as simulated ("sim:fixture": the recorded
//     answer). An echo whose content is not
//     the arguments verbatim is refused with HTTP 400, as Moonshot refuses it.
//   - Anything else is the scripted model's answer.
//
// Usage is the recording's (178 + 1 tokens, then 8182 + 1971: the search results are
// prompt tokens of the second round). With "stream": true the same answers arrive as
// chunks.

// nativeChat answers a request that declares Kimi's or GLM's own search and reports
// whether it did.
func (s *Server) nativeChat(w http.ResponseWriter, r *http.Request, req chatRequest, user, id string) bool {
	if slices.ContainsFunc(req.Tools, func(t chatTool) bool { return t.Type == "builtin_function" && t.Function.Name == "$web_search" }) {
		s.kimiNative(w, r, req, user, id)
		return true
	}
	if i := slices.IndexFunc(req.Tools, func(t chatTool) bool { return t.Type == "web_search" }); i >= 0 {
		s.glmNative(w, r, req, user, id, req.Tools[i].WebSearch)
		return true
	}
	return false
}

// kimiArguments is the arguments string of the $web_search call answering user: the
// recorded shape with a search_id of its own.
func kimiArguments(user string) (callID, args string) {
	sum := sha256.Sum256([]byte("kimi:" + user))
	h := hex.EncodeToString(sum[:])
	return "t-web_search-" + h[:12], fmt.Sprintf(`{"search_result":{"search_id":"%s"},"usage":{"total_tokens":7946}}`, h[:32])
}

// kimiNative answers a request that declared $web_search.
func (s *Server) kimiNative(w http.ResponseWriter, r *http.Request, req chatRequest, user, id string) {
	last := req.Messages[len(req.Messages)-1]
	var (
		msg    map[string]any
		finish string
		usage  map[string]int
	)
	echoed, problem := kimiEcho(req.Messages, user)
	switch {
	case last.Role == "tool" && echoed:
		if problem != "" {
			writeError(w, http.StatusBadRequest, []byte(fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error"}}`, problem)))
			return
		}
		s.stats.count("model_kimi_echo", nil, id)
		msg, finish, usage = kimiRecorded("moonshot/hermoonshotes-round2-final.response.json")
		if strings.Contains(user, "sim:fixture") {
			msg["content"] = simulatedPrefix + "The search found:\n\n" + msg["content"].(string)
		} else {
			msg["content"] = kimiText(newAsk(user, 0, nil, nil, ""), simulatedPrefix+"The search found:\n\n")
		}
	case last.Role == "user" && wantsSearch(user):
		s.stats.count("model_native_search", nil, id)
		msg, finish, usage = kimiRecorded("moonshot/hermoonshotes-round1-tool-calls.response.json")
		callID, args := kimiArguments(user)
		call := msg["tool_calls"].([]any)[0].(map[string]any)
		call["id"] = callID
		call["function"].(map[string]any)["arguments"] = args
	default:
		msg, finish = script(req, user, id)
		usage = scriptUsage(msg, 10)
	}
	writeChat(w, r, req, user, id, msg, finish, usage, false)
}

// kimiRecorded returns a recorded answer's message, finish reason and usage.
func kimiRecorded(name string) (map[string]any, string, map[string]int) {
	var rec struct {
		Choices []struct {
			Message      map[string]any `json:"message"`
			FinishReason string         `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]int `json:"usage"`
	}
	json.Unmarshal(fixtures.Read(name), &rec)
	return rec.Choices[0].Message, rec.Choices[0].FinishReason, rec.Usage
}

// kimiCall finds the call id of an assistant message of msgs.
func kimiCall(msgs []llm.Message, id string) (llm.ToolCall, bool) {
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if m.Role == "assistant" && c.ID == id {
				return c, true
			}
		}
	}
	return llm.ToolCall{}, false
}

// kimiEcho checks the echo of the $web_search calls, the request's last tool messages
// that answer one (echoed: there are some): each one's content is its call's arguments
// verbatim, as this simulator issued them. problem is what is wrong ("": nothing).
func kimiEcho(msgs []llm.Message, user string) (echoed bool, problem string) {
	_, want := kimiArguments(user)
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role == "tool"; i-- {
		c, ok := kimiCall(msgs, msgs[i].ToolCallID)
		if !ok || c.Function.Name != "$web_search" {
			continue
		}
		echoed = true
		if problem == "" && (c.Function.Arguments != want || llm.Text(msgs[i].Content) != want) {
			problem = "Invalid request: the tool message of the $web_search call " + c.ID + " must carry the call's arguments verbatim (simulated Moonshot error)"
		}
	}
	if problem == "" && strings.TrimSpace(user) == "" {
		problem = "Invalid request: no user message (simulated Moonshot error)"
	}
	return echoed, problem
}

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
	var evs []wire.Event
	send := func(v map[string]any) {
		v["id"], v["created"], v["model"] = rec["id"], rec["created"], req.Model
		evs = append(evs, wire.Event{Data: mustJSON(v)})
	}
	for _, tok := range tokens(content) {
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": tok}}}})
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": "stop"}},
		"usage": rec["usage"], "web_search": rec["web_search"]})
	writeChunks(w, r, evs, 0)
}
