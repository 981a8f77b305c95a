package simulator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
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
	for _, t := range req.Tools {
		if t.Function.Name == "web_search" {
			s.stats.count("model_offered_web_search", nil, string(body))
			break
		}
	}
	user := lastUser(req.Messages)
	if !s.applyFaults(w, r, "model", r.URL.Path, modelFaults(user), errorBody, s.opts.ModelLatency) {
		return scripted{}, false
	}
	sum := sha256.Sum256(body)
	id := hex.EncodeToString(sum[:8])
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
