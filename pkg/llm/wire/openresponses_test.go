package wire_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/openresponses"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	llmresponses "github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The Open Responses specification (openresponses.org) requires every field of a
// ResponseResource in every answer and in every stream snapshot (response.created,
// response.in_progress, response.completed, response.failed, response.incomplete),
// each with its type. These tests hold the fleet's Responses codec to that list.

// conformanceRequest sets every setting a response echoes.
const conformanceRequest = `{"model":"m","input":"Weather in Paris?","instructions":"Be brief.",
 "tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
          {"type":"web_search","search_context_size":"low"}],
 "tool_choice":{"type":"function","name":"get_weather"},"temperature":0.2,"top_p":0.9,"max_output_tokens":300,
 "max_tool_calls":2,"store":false,"metadata":{"k":"v"},"service_tier":"auto","safety_identifier":"u-1",
 "prompt_cache_key":"pk","presence_penalty":0,"frequency_penalty":0,"top_logprobs":0,"truncation":"disabled",
 "reasoning":{"effort":"low"},"parallel_tool_calls":false,
 "text":{"format":{"type":"json_schema","name":"weather","schema":{"type":"object"}}}}`

// responseStates are answers in every state a response object is rendered in.
func responseStates() map[string]*wire.Response {
	created := time.Unix(1700000000, 0)
	_, final := growing("Paris is sunny [1] today.")
	final.ID, final.JobID, final.Finished = "resp_1", "resp_1", created.Add(3*time.Second)
	withCall := *final
	withCall.Content = append(append([]wire.Part(nil), final.Content...),
		wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}})
	withCall.Stop = wire.StopToolUse
	incomplete := *final
	incomplete.Stop = wire.StopMaxTokens
	base := wire.Response{ID: "resp_1", JobID: "resp_1", Model: "m", Created: created}
	queued, running := base, base
	queued.Status, running.Status = wire.StatusQueued, wire.StatusInProgress
	failed := base
	failed.Status, failed.Error = wire.StatusFailed, &wire.Error{Status: 502, Type: "upstream_error", Message: "the model's provider failed"}
	return map[string]*wire.Response{"completed": final, "tool call": &withCall, "incomplete": &incomplete,
		"queued": &queued, "in progress": &running, "failed": &failed}
}

// Every answer, in every state, defaults or echoed settings, has every required field
// with its type.
func TestResponsesAnswersHaveEveryRequiredField(t *testing.T) {
	t.Parallel()
	for _, echo := range []map[string]json.RawMessage{nil, llmresponses.Echo([]byte(conformanceRequest))} {
		for name, r := range responseStates() {
			r.Echo = echo
			b, err := llmresponses.Client.EncodeResponse(r)
			if err != nil {
				t.Fatal(err)
			}
			var o map[string]any
			if err := json.Unmarshal(b, &o); err != nil {
				t.Fatal(err)
			}
			for _, e := range openresponses.CheckResponse(name, o) {
				t.Errorf("echo %v: %s", echo != nil, e)
			}
		}
	}
}

// Every stream, ending in each way, sends events of the spec's shapes, and every
// snapshot has every required field.
func TestResponsesStreamEventsConform(t *testing.T) {
	t.Parallel()
	for _, echo := range []map[string]json.RawMessage{nil, llmresponses.Echo([]byte(conformanceRequest))} {
		stages, final := growing("Paris is sunny [1][2] today.")
		final.Echo = echo
		states := responseStates()
		for _, end := range []string{"completed", "tool call", "incomplete", "failed"} {
			st := llmresponses.Client.NewStream()
			start := *stages[0]
			start.Echo = echo
			evs := st.Start(&start)
			for _, s := range stages {
				evs = append(evs, st.Update(s)...)
			}
			switch end {
			case "failed":
				evs = append(evs, st.Fail(&start, &wire.Error{Status: 502, Message: "the model's provider failed"})...)
			case "completed":
				evs = append(evs, st.Finish(final)...)
			default:
				r := *states[end]
				r.Echo = echo
				evs = append(evs, st.Finish(&r)...)
			}
			for _, e := range openresponses.CheckEvents(events(evs)) {
				t.Errorf("%s (echo %v): %s", end, echo != nil, e)
			}
		}
	}
}

// A response repeats the request's settings as the client sent them (tools with their
// optional fields, tool_choice, instructions, sampling, limits, store), and the
// official SDK reads them.
func TestResponsesEchoTheRequest(t *testing.T) {
	t.Parallel()
	if _, err := llmresponses.Client.DecodeRequest([]byte(conformanceRequest)); err != nil {
		t.Fatal(err)
	}
	r := responseStates()["completed"]
	r.Echo = llmresponses.Echo([]byte(conformanceRequest))
	b, err := llmresponses.Client.EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	var resp responses.Response
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Instructions.OfString != "Be brief." || resp.Temperature != 0.2 || resp.TopP != 0.9 || resp.MaxOutputTokens != 300 || resp.MaxToolCalls != 2 {
		t.Errorf("settings not echoed: instructions %q temperature %v top_p %v max_output_tokens %d max_tool_calls %d",
			resp.Instructions.OfString, resp.Temperature, resp.TopP, resp.MaxOutputTokens, resp.MaxToolCalls)
	}
	if resp.ToolChoice.Name != "get_weather" || resp.ParallelToolCalls || resp.ServiceTier != "default" || resp.SafetyIdentifier != "u-1" || resp.PromptCacheKey != "pk" {
		t.Errorf("tool_choice %+v parallel %v tier %q safety %q cache key %q", resp.ToolChoice, resp.ParallelToolCalls, resp.ServiceTier, resp.SafetyIdentifier, resp.PromptCacheKey)
	}
	if len(resp.Tools) != 2 || resp.Tools[0].Name != "get_weather" || resp.Tools[1].Type != "web_search" || resp.Tools[1].SearchContextSize != "low" {
		t.Errorf("tools = %s", resp.JSON.Tools.Raw())
	}
	if f := resp.Text.Format; f.Type != "json_schema" || f.Name != "weather" || f.JSON.Description.Raw() != "null" || f.JSON.Strict.Raw() != "false" {
		t.Errorf("text.format = %s", resp.JSON.Text.Raw())
	}
	if resp.Reasoning.Effort != "low" || resp.CompletedAt != float64(r.Finished.Unix()) || resp.Metadata["k"] != "v" {
		t.Errorf("reasoning %+v completed_at %v metadata %v", resp.Reasoning, resp.CompletedAt, resp.Metadata)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(b, &raw)
	if string(raw["store"]) != "false" {
		t.Errorf("store = %s, want the request's false", raw["store"])
	}
	// Without settings, the defaults: numbers, not nulls.
	r.Echo = nil
	b, _ = llmresponses.Client.EncodeResponse(r)
	json.Unmarshal(b, &raw)
	for k, want := range map[string]string{"temperature": "1", "top_p": "1", "tool_choice": `"auto"`, "tools": "[]", "instructions": "null", "store": "true", "service_tier": `"default"`} {
		if string(raw[k]) != want {
			t.Errorf("default %s = %s, want %s", k, raw[k], want)
		}
	}
}

// The settings a response object repeats are validated like the rest of the request.
func TestResponsesRefusesMalformedSettings(t *testing.T) {
	t.Parallel()
	for field, v := range map[string]string{"max_tool_calls": "0", "top_logprobs": "21", "presence_penalty": `"x"`, "service_tier": `"gold"`,
		"truncation": `"middle"`, "store": `"yes"`, "safety_identifier": `"` + strings.Repeat("x", 65) + `"`, "metadata": `{"k":1}`} {
		body := fmt.Sprintf(`{"model":"m","input":"hi",%q:%s}`, field, v)
		_, err := llmresponses.Client.DecodeRequest([]byte(body))
		if e := wire.AsError(err); err == nil || e.Status != 400 || e.Param != field {
			t.Errorf("%s=%s: %v", field, v, err)
		}
	}
}

// max_tool_calls bounds the server tools the fleet runs; a tool_choice of web_search
// forces the first model call to search.
func TestResponsesToolLimitsAndForcedSearch(t *testing.T) {
	t.Parallel()
	req, err := llmresponses.Client.DecodeRequest([]byte(`{"model":"m","input":"hi","max_tool_calls":3,"tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Search == nil || req.Search.MaxUses != 3 || req.Search.MaxFetches != 3 || !req.Search.Forced || !req.Search.Requested {
		t.Fatalf("search = %+v", req.Search)
	}
	for _, n := range req.AllNotes() {
		if strings.Contains(n, "tool_choice") {
			t.Errorf("a forced web_search is honoured, noted %q", n)
		}
	}
	req, err = llmresponses.Client.DecodeRequest([]byte(`{"model":"m","input":"hi","max_tool_calls":2,"tools":[{"type":"web_search","max_uses":5}]}`))
	if err != nil || req.Search.MaxUses != 2 {
		t.Fatalf("max_tool_calls 2 under max_uses 5: %+v %v", req.Search, err)
	}
	// A Messages tool_choice naming the web_search server tool forces it too.
	req, err = anthropic.Client.DecodeRequest([]byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}],
		"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"web_search"}}`))
	if err != nil || req.Search == nil || !req.Search.Forced || len(req.AllNotes()) != 0 {
		t.Fatalf("Messages forced web_search: %+v %v %v", req.Search, req.AllNotes(), err)
	}
}

func events(evs []wire.Event) []openresponses.Event {
	out := make([]openresponses.Event, len(evs))
	for i, e := range evs {
		out[i] = openresponses.Event{Name: e.Name, Data: e.Data}
	}
	return out
}
