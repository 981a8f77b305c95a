package responses

import (
	"encoding/json"
	"slices"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// PerplexityAgent is Perplexity's Agent API as a main model: POST
// {base}/v1/agent (base https://api.perplexity.ai) with a bearer key, a model named
// "provider/model" ("openai/gpt-5.2", "perplexity/sonar"). It is the Responses
// protocol with what the Agent API's request schema lacks taken out (Perplexity's
// SDK, response_create_params): no store, include, tool_choice,
// parallel_tool_calls, temperature, top_p or text; every input message an item of
// type "message"; no reasoning items (its answers carry none), reasoning reduced to
// its effort; a structured answer asked as response_format in the Chat form. Its
// answers are Responses answers (search_results items are read past), read by the
// Responses codec.
//
// It answers whole: a streamed request is sent unstreamed, and the caller hands the
// text on when the answer arrives. The provider's own search is not forwarded (the
// fleet's web_search runs).
var PerplexityAgent perplexityAgentModel

type perplexityAgentModel struct{ responsesModel }

func (perplexityAgentModel) Path(string, bool) string { return "/v1/agent" }

// NativeSearch: none is forwarded.
func (perplexityAgentModel) NativeSearch(string) (string, float64, bool) { return "", 0, false }

// NativeSearchFits: the Agent API's web_search is not forwarded as the model's own.
func (perplexityAgentModel) NativeSearchFits(*wire.Request, string) bool { return false }

// perplexityDropped are the Responses request fields the Agent API does not take.
var perplexityDropped = []string{"store", "include", "tool_choice", "parallel_tool_calls", "temperature", "top_p", "text", "stream"}

func (perplexityAgentModel) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	b, err := Model.EncodeRequest(r, model)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	for _, k := range perplexityDropped {
		delete(top, k)
	}
	var input []map[string]any
	if err := json.Unmarshal(top["input"], &input); err != nil {
		return nil, err
	}
	input = slices.DeleteFunc(input, func(it map[string]any) bool { return it["type"] == "reasoning" })
	for _, it := range input {
		if _, typed := it["type"]; !typed {
			it["type"] = "message"
		}
	}
	if top["input"], err = json.Marshal(input); err != nil {
		return nil, err
	}
	if raw, ok := top["reasoning"]; ok {
		var rc struct {
			Effort string `json:"effort"`
		}
		delete(top, "reasoning")
		if json.Unmarshal(raw, &rc) == nil && slices.Contains([]string{"low", "medium", "high"}, rc.Effort) {
			top["reasoning"], _ = json.Marshal(rc)
		}
	}
	if !wire.IsNull(r.ResponseFormat) {
		top["response_format"] = r.ResponseFormat
	}
	return json.Marshal(top)
}
