package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

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
