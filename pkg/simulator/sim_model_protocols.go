package simulator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The scripted main model also speaks OpenAI Responses (POST /v1/responses),
// Anthropic Messages (POST /v1/messages) and Gemini (POST
// /v1beta/models/{model}:generateContent and :streamGenerateContent?alt=sse). Each
// endpoint reads its protocol's request into the Chat form the script reads, runs the
// same script (the same directives, faults included: a standing fault on the
// endpoint's path answers in the protocol's error shape) and writes the answer in its
// protocol's shapes, streamed when asked. Each requires its protocol's key header.

// scripted is one answer of the script, protocol-neutral.
type scripted struct {
	id    string
	user  string
	text  string
	calls []llm.ToolCall
	stop  wire.StopReason
	usage wire.Usage
	// userTurn: the conversation ends with the user's message.
	userTurn bool
}

// ownSearch reports whether the model's own search answers instead of the script: the
// request declared it, the user's turn asks for a search, and the script called no
// tool.
func (a scripted) ownSearch(declared bool) bool {
	return declared && a.userTurn && wantsSearch(a.user) && len(a.calls) == 0
}

// playRequest reads a request of codec's protocol and plays the script on it (play):
// a request without its protocol's key headers (keyed false) is refused with noKey,
// one that does not decode in the protocol's words, and one without messages with
// empty. ok is false when the answer is written already.
func (s *Server) playRequest(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, keyed bool, noKey, empty string) (req *wire.Request, body []byte, a scripted, ok bool) {
	if body, ok = s.readBody(w, r); !ok {
		return nil, nil, a, false
	}
	fail := func(status int, msg string) []byte {
		return codec.EncodeError(&wire.Error{Status: status, Message: msg})
	}
	if !keyed {
		writeError(w, http.StatusUnauthorized, fail(http.StatusUnauthorized, noKey))
		return nil, nil, a, false
	}
	req, err := codec.DecodeRequest(body)
	if err != nil {
		e := wire.AsError(err)
		writeError(w, e.Status, codec.EncodeError(e))
		return nil, nil, a, false
	}
	creq, err := chatForm(req)
	if err != nil || len(creq.Messages) == 0 {
		writeError(w, http.StatusBadRequest, fail(http.StatusBadRequest, empty))
		return nil, nil, a, false
	}
	a, ok = s.play(w, r, body, creq, func(status int) []byte { return fail(status, "simulated model failure") })
	return req, body, a, ok
}

// play counts the request, applies the model faults of the user's text and the
// standing faults of the path (answering them with errorBody), and runs the script.
func (s *Server) play(w http.ResponseWriter, r *http.Request, body []byte, req chatRequest, errorBody func(int) []byte) (scripted, bool) {
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, errorBody(http.StatusBadRequest))
		return scripted{}, false
	}
	user, id, ok := s.admit(w, r, body, req, errorBody, s.opts.ModelLatency)
	if !ok {
		return scripted{}, false
	}
	msg, finish := script(req, user, id)
	a := scripted{id: id, user: user, stop: wire.StopEndTurn, userTurn: req.Messages[len(req.Messages)-1].Role == "user"}
	if finish == "tool_calls" {
		a.stop = wire.StopToolUse
	}
	a.text, _ = msg["content"].(string)
	json.Unmarshal(mustJSON(msg["tool_calls"]), &a.calls) // null when there are none
	a.usage = wire.Usage{InputTokens: len(body) / 4, OutputTokens: len(a.text)/4 + 1}
	return a, true
}

// admit counts a model request (model_offered_web_search when its tools offer
// web_search), applies latency, the model faults of the user's text and the standing
// faults of the path (answering them with errorBody; nil: the generic envelope), and
// returns the user's text and the answer's id; ok is false when it answered itself.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, body []byte, req chatRequest, errorBody func(int) []byte, latency time.Duration) (user, id string, ok bool) {
	if slices.ContainsFunc(req.Tools, func(t chatTool) bool { return t.Function.Name == "web_search" }) {
		s.stats.count("model_offered_web_search", body, "")
	}
	user = lastUser(req.Messages)
	if !s.applyFaults(w, r, "model", r.URL.Path, modelFaults(user), errorBody, latency) {
		return "", "", false
	}
	sum := sha256.Sum256(body)
	return user, hex.EncodeToString(sum[:8]), true
}

// response is the answer in canonical form, its tool call ids made by rename.
func (a scripted) response(id, model string, rename func(string) string) *wire.Response {
	r := &wire.Response{ID: id, Model: model, Created: time.Now().UTC(), Status: wire.StatusCompleted, Stop: a.stop, Usage: a.usage}
	if a.text != "" {
		r.Content = append(r.Content, wire.Part{Kind: wire.PartText, Text: a.text})
	}
	for _, c := range a.calls {
		r.Content = append(r.Content, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: rename(c.ID), Name: c.Function.Name, Arguments: c.Function.Arguments}})
	}
	return r
}

// chatForm renders a decoded request in the Chat form the script reads.
func chatForm(req *wire.Request) (chatRequest, error) {
	var out chatRequest
	body, err := openaichat.Client.EncodeRequest(req, req.Model)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(body, &out)
	return out, err
}

// readBody reads a model request body and counts it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, ok := s.readCounted(w, r, 32<<20, "model", r.URL.RawQuery)
	if ok {
		s.stats.countFiles(r.URL.Path, body)
	}
	return body, ok
}

// writeError writes an error body with its status.
func writeError(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// writeJSON writes a 200 JSON answer.
func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// writeEvents sends events as server-sent events, each flushed, delay apart; false
// when the client went away first.
func writeEvents(w http.ResponseWriter, r *http.Request, evs []wire.Event, delay time.Duration) bool {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for i, ev := range evs {
		if i > 0 && delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return false
			}
		}
		wire.WriteSSE(w, []wire.Event{ev})
		rc.Flush()
	}
	return true
}

// streamEvents renders resp as st's events a token at a time, as a model writes: the
// opening events, one update per token of the answer's text (tokens), then the end.
// An answer without text (tool calls only) has no updates.
func streamEvents(st wire.Stream, resp *wire.Response) []wire.Event {
	evs := st.Start(resp)
	text := resp.Text()
	written := ""
	// The reasoning a model writes first comes first.
	var lead []wire.Part
	for _, p := range resp.Content {
		if p.Kind != wire.PartReasoning {
			break
		}
		lead = append(lead, p)
	}
	for _, tok := range tokens(text) {
		written += tok
		partial := *resp
		partial.Content = append(append([]wire.Part(nil), lead...), wire.Part{Kind: wire.PartText, Text: written})
		evs = append(evs, st.Update(&partial)...)
	}
	return append(evs, st.Finish(resp)...)
}

// openAIResponses is the scripted model as an OpenAI Responses API (POST
// /v1/responses, a bearer key required): message and function_call output items,
// the response.* stream events ending in response.completed, and the OpenAI error
// envelope.
func (s *Server) openAIResponses(w http.ResponseWriter, r *http.Request) {
	keyed := strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")
	req, body, a, ok := s.playRequest(w, r, responses.Client, keyed, "simulator: a bearer key is required", "simulator: 'input' has no messages")
	if !ok {
		return
	}
	if a.ownSearch(req.Search != nil) {
		// OpenAI's own web_search tool: a web_search_call item with its sources (the
		// request's allowed domains honoured) and a message whose url_citation
		// annotations cover a link after each sentence.
		s.nativeSearch(w, r, req.Stream, a.user, a.id, "openai/pydantic-responses-raw-annotations-stream.sse",
			func() []byte { return responsesRecorded(req.Model, a.id) },
			func() []byte { return responsesBody(nativeAsk(a.user, req.Search), req.Model, a.id, simulatedPrefix) }, responsesStream)
		return
	}
	reasoning, _ := responsesReasoningOn(body)
	if reasoning && !s.reasoningPasses(w, string(body), body, responsesReasoningError, responses.Client.EncodeError) {
		return
	}
	rename := func(id string) string { return id }
	if reasoning {
		rename = func(id string) string { return "call_rs_" + strings.TrimPrefix(id, "call_") }
	}
	resp := a.response("resp_sim_"+a.id, req.Model, rename)
	b, _ := responses.Client.EncodeResponse(resp)
	if reasoning {
		b = withReasoningItem(b, body, a.user, a.id)
	}
	switch {
	case reasoning && req.Stream:
		// The answer with its reasoning item, played as OpenAI streams it.
		writeEvents(w, r, responsesStream(b), tokenDelay(a.user))
	case req.Stream:
		writeEvents(w, r, streamEvents(responses.Client.NewStream(), resp), tokenDelay(a.user))
	default:
		writeJSON(w, b)
	}
}

// simulatedPrefix marks the text of a recorded answer the simulator replays.
const simulatedPrefix = "(simulated answer) "

// nativeSearch answers a request that declared the model's own search tool with one
// search for the user's text: answer, pages generated from the text in the
// protocol's shape with its text marked as simulated, or, streamed, events of it
// (sim_native_stream.go). "sim:fixture" in the text answers with the recordings
// instead: recorded, or streamed the recorded stream sse as it was.
func (s *Server) nativeSearch(w http.ResponseWriter, r *http.Request, stream bool, user, id, sse string,
	recorded, answer func() []byte, events func([]byte) []wire.Event) {
	s.stats.count("model_native_search", nil, id)
	switch fixture := strings.Contains(user, "sim:fixture"); {
	case fixture && stream:
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(fixtures.Read(sse))
	case fixture:
		writeJSON(w, recorded())
	case stream:
		writeEvents(w, r, events(answer()), tokenDelay(user))
	default:
		writeJSON(w, answer())
	}
}

// responsesRecorded is the recorded native-search answer (the gpt-5-mini one), its
// text marked as simulated and its annotations moved to match.
func responsesRecorded(model, id string) []byte {
	resp := decodeBody(fixtures.Read("openai/vercel-responses-web-search-gpt5mini.json"))
	resp["id"], resp["model"] = "resp_sim_"+id, model
	shift := float64(utf8.RuneCountInString(simulatedPrefix)) // annotations count code points
	for _, it := range resp["output"].([]any) {
		item := it.(map[string]any)
		if item["type"] != "message" {
			continue
		}
		for _, c := range item["content"].([]any) {
			part := c.(map[string]any)
			part["text"] = simulatedPrefix + part["text"].(string)
			for _, a := range part["annotations"].([]any) {
				an := a.(map[string]any)
				an["start_index"], an["end_index"] = an["start_index"].(float64)+shift, an["end_index"].(float64)+shift
			}
		}
		break
	}
	return mustJSON(resp)
}

// nativeAsk is the search a model's own search tool makes for the user's text, with
// the request's domain filters and count.
func nativeAsk(user string, opts *llm.SearchOptions) searchAsk {
	if opts == nil {
		return newAsk(user, 0, nil, nil, "")
	}
	return newAsk(user, opts.Count, opts.AllowedDomains, opts.BlockedDomains, "")
}

// anthropicRecorded is the recorded native-search answer (vercel-web-search-nonstream.json),
// its text marked as simulated.
func anthropicRecorded(model, id string) []byte {
	msg := decodeBody(fixtures.Read("anthropic/vercel-web-search-nonstream.json"))
	msg["id"], msg["model"] = "msg_sim_"+id, model
	for _, b := range msg["content"].([]any) {
		if block := b.(map[string]any); block["type"] == "text" {
			block["text"] = simulatedPrefix + block["text"].(string)
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

// perplexityAgentRefused are the Responses request fields Perplexity's Agent API
// request schema does not have (its SDK's response_create_params): the simulated
// Agent API refuses them, so a main model that sent one is seen to.
var perplexityAgentRefused = []string{"store", "include", "tool_choice", "parallel_tool_calls", "temperature", "top_p", "text"}

// perplexityAgentModel is the scripted model as Perplexity's Agent API (POST
// /v1/agent): the Responses shape of openAIResponses, with the Agent API's request
// rules checked first (a model named "provider/model", input items typed, none of
// perplexityAgentRefused) and refused in the OpenAI error envelope it shares.
func (s *Server) perplexityAgentModel(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	top, msg := perplexityAgentProblem(body)
	if msg != "" {
		writeError(w, http.StatusBadRequest, responses.Client.EncodeError(&wire.Error{Status: http.StatusBadRequest, Message: "simulator (Agent API): " + msg}))
		return
	}
	// The scripted model answers text, and, as the Agent API, gives no reasoning items.
	delete(top, "response_format")
	top["reasoning"] = json.RawMessage(`{"effort":"none"}`)
	body, _ = json.Marshal(top)
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.openAIResponses(w, r)
}

// perplexityAgentProblem is what the Agent API would not take in body, "" when none,
// and the body's fields.
func perplexityAgentProblem(body []byte) (top map[string]json.RawMessage, problem string) {
	if json.Unmarshal(body, &top) != nil || top == nil {
		return nil, "the body is not a JSON object"
	}
	for _, k := range perplexityAgentRefused {
		if _, ok := top[k]; ok {
			return top, fmt.Sprintf("%q is not a field of the Agent API", k)
		}
	}
	var model string
	if json.Unmarshal(top["model"], &model) != nil || !bytes.ContainsRune([]byte(model), '/') {
		return top, "'model' must be provider/model"
	}
	var input []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(top["input"], &input) == nil {
		for i, it := range input {
			if it.Type != "message" && it.Type != "function_call" && it.Type != "function_call_output" {
				return top, fmt.Sprintf("input[%d].type %q is not message, function_call or function_call_output", i, it.Type)
			}
		}
	}
	return top, ""
}
