package simulator

import (
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// anthropicMessages is the scripted model as an Anthropic Messages API (POST
// /v1/messages, x-api-key and anthropic-version required): tool_use blocks with
// toolu_ ids, end_turn / tool_use stop reasons, the Messages stream events, and
// {"type":"error",…} bodies (a 529 is an overloaded_error).
func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	fail := func(status int, msg string) []byte {
		return wire.Anthropic.EncodeError(&wire.Error{Status: status, Message: msg})
	}
	if r.Header.Get("x-api-key") == "" || r.Header.Get("anthropic-version") == "" {
		writeError(w, http.StatusUnauthorized, fail(http.StatusUnauthorized, "simulator: x-api-key and anthropic-version headers are required"))
		return
	}
	req, err := wire.Anthropic.DecodeRequest(body)
	if err != nil {
		e := wire.AsError(err)
		writeError(w, e.Status, wire.Anthropic.EncodeError(e))
		return
	}
	creq, err := chatForm(req)
	if err != nil || len(creq.Messages) == 0 {
		writeError(w, http.StatusBadRequest, fail(http.StatusBadRequest, "simulator: messages: the conversation is empty"))
		return
	}
	a, ok := s.play(w, r, body, creq, func(status int) []byte { return fail(status, "simulated model failure") })
	if !ok {
		return
	}
	resp := a.response("msg_sim_"+a.id, req.Model, func(id string) string { return "toolu_" + strings.TrimPrefix(id, "call_") })
	if !req.Stream {
		b, _ := wire.Anthropic.EncodeResponse(resp)
		writeJSON(w, b)
		return
	}
	st := wire.Anthropic.NewStream()
	writeEvents(w, r, append(st.Start(resp), st.Finish(resp)...), tokenDelay(a.user))
}
