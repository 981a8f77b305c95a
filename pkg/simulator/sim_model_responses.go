package simulator

import (
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// openAIResponses is the scripted model as an OpenAI Responses API (POST
// /v1/responses, a bearer key required): message and function_call output items,
// the response.* stream events ending in response.completed, and the OpenAI error
// envelope.
func (s *Server) openAIResponses(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	fail := func(status int, msg string) []byte {
		return wire.Responses.EncodeError(&wire.Error{Status: status, Message: msg})
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		writeError(w, http.StatusUnauthorized, fail(http.StatusUnauthorized, "simulator: a bearer key is required"))
		return
	}
	req, err := wire.Responses.DecodeRequest(body)
	if err != nil {
		e := wire.AsError(err)
		writeError(w, e.Status, wire.Responses.EncodeError(e))
		return
	}
	creq, err := chatForm(req)
	if err != nil || len(creq.Messages) == 0 {
		writeError(w, http.StatusBadRequest, fail(http.StatusBadRequest, "simulator: 'input' has no messages"))
		return
	}
	a, ok := s.play(w, r, body, creq, func(status int) []byte { return fail(status, "simulated model failure") })
	if !ok {
		return
	}
	resp := a.response("resp_sim_"+a.id, req.Model, func(id string) string { return id })
	if !req.Stream {
		b, _ := wire.Responses.EncodeResponse(resp)
		writeJSON(w, b)
		return
	}
	st := wire.Responses.NewStream()
	writeEvents(w, r, streamEvents(st, resp), tokenDelay(a.user))
}
