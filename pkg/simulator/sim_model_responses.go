package simulator

import (
	"encoding/json"
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
		s.responsesNative(w, r, req, a.user, a.id)
		return
	}
	reasoning, ok := s.responsesReasoning(w, body)
	if !ok {
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

// responsesNative answers a request that declared OpenAI's own web_search tool with
// one search for the user's text: a web_search_call item with the sources it found
// (pages generated from the text, the request's allowed domains honoured) and a
// message whose url_citation annotations cover a link after each sentence, its text
// marked as simulated; streamed, the same answer as response.* events. "sim:fixture"
// in the text answers with the recordings instead (non-streamed the gpt-5-mini one,
// text marked and annotations moved to match; streamed the gpt-5.2 event stream as it
// was).
func (s *Server) responsesNative(w http.ResponseWriter, r *http.Request, req *wire.Request, user, id string) {
	s.stats.count("model_native_search", nil, id)
	if strings.Contains(user, "sim:fixture") {
		responsesRecorded(w, req, id)
		return
	}
	body := responsesBody(nativeAsk(user, req.Search), req.Model, id, simulatedPrefix)
	if req.Stream {
		writeEvents(w, r, responsesStream(body), tokenDelay(user))
		return
	}
	writeJSON(w, body)
}

// responsesRecorded answers with the recorded native-search answers.
func responsesRecorded(w http.ResponseWriter, req *wire.Request, id string) {
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(fixtures.Read("openai/pydantic-responses-raw-annotations-stream.sse"))
		return
	}
	var resp map[string]any
	json.Unmarshal(fixtures.Read("openai/vercel-responses-web-search-gpt5mini.json"), &resp)
	resp["id"], resp["model"] = "resp_sim_"+id, req.Model
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
	b, _ := json.Marshal(resp)
	writeJSON(w, b)
}

// nativeAsk is the search a model's own search tool makes for the user's text, with
// the request's domain filters and count.
func nativeAsk(user string, opts *llm.SearchOptions) searchAsk {
	if opts == nil {
		return newAsk(user, 0, nil, nil, "")
	}
	return newAsk(user, opts.Count, opts.AllowedDomains, opts.BlockedDomains, "")
}
