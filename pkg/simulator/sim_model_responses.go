package simulator

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

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
	if reasoning || !req.Stream {
		b, _ := responses.Client.EncodeResponse(resp)
		if reasoning {
			b = withReasoningItem(b, body, a.user, a.id)
		}
		if req.Stream {
			// The answer with its reasoning item, played as OpenAI streams it.
			writeEvents(w, r, responsesStream(b), tokenDelay(a.user))
			return
		}
		writeJSON(w, b)
		return
	}
	st := responses.Client.NewStream()
	writeEvents(w, r, streamEvents(st, resp), tokenDelay(a.user))
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
