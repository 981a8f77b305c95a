// Package responses is OpenAI Responses in both directions: the codec of the clients
// that speak it to the ingress (Client, with compaction) and of the main models the
// fleet calls with it (Model).
package responses

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Client is the OpenAI Responses API codec (client side).
var Client responsesCodec

type responsesCodec struct{}

func (responsesCodec) Protocol() wire.Protocol { return wire.OpenAIResponses }

func (responsesCodec) EncodeError(e *wire.Error) []byte { return wire.OpenAIError(e) }

// responsesEchoed are parameters a response object repeats that the fleet does not
// pass to its model: a value other than 0 is noted as not honoured.
var responsesEchoed = map[string]bool{"presence_penalty": true, "frequency_penalty": true, "top_logprobs": true}

// DecodeRequest reads a Responses request: input as a string or items (messages,
// function_call, function_call_output, earlier web_search_call and reasoning items, a
// compaction of POST /v1/responses/compact), instructions, function tools, web_search /
// web_search_preview tools.
func (responsesCodec) DecodeRequest(body []byte) (*wire.Request, error) {
	top, err := wire.JSONObject(body)
	if err != nil {
		return nil, err
	}
	r := &wire.Request{}
	if v, ok := top["model"]; ok && !wire.IsNull(v) {
		// Read first: errors about the input name the model.
		if json.Unmarshal(v, &r.Model) != nil || strings.TrimSpace(r.Model) == "" {
			return nil, wire.Invalid("model", "'model' must be a non-empty string")
		}
	}
	maxToolCalls := 0
	for _, k := range slices.Sorted(maps.Keys(top)) {
		v := top[k]
		if wire.IsNull(v) {
			continue
		}
		var err error
		switch k {
		case "model":
		case "input":
			err = responsesInput(r, v)
		case "instructions":
			if json.Unmarshal(v, &r.System) != nil {
				return nil, wire.Invalid(k, "'instructions' must be a string")
			}
		case "tools":
			err = responsesTools(r, v)
		case "tool_choice":
			err = responsesToolChoice(r, v)
		case "max_output_tokens":
			if json.Unmarshal(v, &r.MaxTokens) != nil || r.MaxTokens < 1 {
				return nil, wire.Invalid(k, "'max_output_tokens' must be a positive integer")
			}
		case "max_tool_calls":
			if json.Unmarshal(v, &maxToolCalls) != nil || maxToolCalls < 1 {
				return nil, wire.Invalid(k, "'max_tool_calls' must be a positive integer")
			}
		case "presence_penalty", "frequency_penalty":
			var f float64
			if json.Unmarshal(v, &f) != nil || f < -2 || f > 2 {
				return nil, wire.Invalid(k, "'%s' must be a number from -2 to 2", k)
			}
		case "top_logprobs":
			var n int
			if json.Unmarshal(v, &n) != nil || n < 0 || n > 20 {
				return nil, wire.Invalid(k, "'top_logprobs' must be an integer from 0 to 20")
			}
		case "store":
			err = wire.DecodeAs(k, v, new(bool), "a boolean")
		case "service_tier":
			var t string
			if json.Unmarshal(v, &t) != nil || !slices.Contains([]string{"auto", "default", "flex", "priority"}, t) {
				return nil, wire.Invalid(k, "'service_tier' must be one of auto, default, flex, priority")
			}
		case "truncation":
			var t string
			if json.Unmarshal(v, &t) != nil || t != "auto" && t != "disabled" {
				return nil, wire.Invalid(k, "'truncation' must be auto or disabled")
			}
		case "safety_identifier", "prompt_cache_key":
			var t string
			if json.Unmarshal(v, &t) != nil || len(t) > 64 {
				return nil, wire.Invalid(k, "'%s' must be a string of at most 64 characters", k)
			}
		case "metadata":
			var m map[string]string
			if json.Unmarshal(v, &m) != nil || len(m) > 16 {
				return nil, wire.Invalid(k, "'metadata' must be an object of at most 16 string values")
			}
			for mk, mv := range m {
				if len(mk) > 64 || len(mv) > 512 {
					return nil, wire.Invalid(k, "'metadata' keys are at most 64 characters and values at most 512")
				}
			}
		case "temperature":
			err = wire.DecodeAs(k, v, &r.Temperature, "a number")
		case "top_p":
			err = wire.DecodeAs(k, v, &r.TopP, "a number")
		case "parallel_tool_calls":
			err = wire.DecodeAs(k, v, &r.ParallelToolCalls, "a boolean")
		case "stream":
			err = wire.DecodeAs(k, v, &r.Stream, "a boolean")
		case "background":
			err = wire.DecodeAs(k, v, &r.Background, "a boolean")
		case "text":
			err = responsesText(r, v)
		case "reasoning":
			r.Reasoning, err = decodeReasoning(v)
		case "include":
			var include []string
			if json.Unmarshal(v, &include) != nil {
				return nil, wire.Invalid(k, "'include' must be an array of strings")
			}
			r.EncryptedReasoning = slices.Contains(include, "reasoning.encrypted_content")
		case "previous_response_id":
			// The ingress resolves it into the input before decoding (ResolveResponsesInput).
			return nil, wire.Invalid(k, "'previous_response_id' could not be resolved on this server")
		case "conversation", "prompt":
			return nil, wire.Invalid(k, "'%s' is not supported by this server; send the conversation in 'input' or name it with 'previous_response_id'", k)
		case "user", "stream_options": // accepted without effect on the answer
		default:
			return nil, wire.Invalid(k, "Unknown parameter: '%s'.", k)
		}
		if err != nil {
			return nil, err
		}
		if responsesEchoed[k] && string(v) != "0" {
			r.Notes = append(r.Notes, k+" is not honoured: the fleet's model uses its default")
		}
	}
	if maxToolCalls > 0 {
		// max_tool_calls bounds the server tools the fleet runs for the request.
		r.AddSearch(&llm.SearchOptions{MaxUses: maxToolCalls, MaxFetches: maxToolCalls})
	}
	if r.Model == "" {
		return nil, wire.Invalid("model", "Missing required parameter: 'model'.")
	}
	if len(r.Messages) == 0 {
		return nil, wire.Invalid("input", "Missing required parameter: 'input'.")
	}
	if r.Stream && r.Background {
		return nil, wire.Invalid("stream", "'stream' and 'background' cannot both be true on this server")
	}
	return r, nil
}

// responsesItem is an input item, of any type.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	// EncryptedContent is a compaction item's (compaction.go) or a reasoning item's
	// (seal.go).
	EncryptedContent string           `json:"encrypted_content"`
	Action           *responsesAction `json:"action"`
}

func responsesInput(r *wire.Request, v json.RawMessage) error {
	var s string
	if json.Unmarshal(v, &s) == nil {
		r.Messages = append(r.Messages, wire.Message{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: s}}})
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		return wire.Invalid("input", "'input' must be a string or an array of input items")
	}
	// add appends parts to the last message when it has the role, else a new message.
	add := func(role wire.Role, p ...wire.Part) {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role && role != wire.RoleUser {
			r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, p...)
			return
		}
		r.Messages = append(r.Messages, wire.Message{Role: role, Parts: p})
	}
	for i, raw := range items {
		param := fmt.Sprintf("input[%d]", i)
		var it responsesItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return wire.Invalid(param, "%s is not a valid input item: %s", param, redact.JSONError(err))
		}
		switch it.Type {
		case "message", "":
			role := wire.Role(it.Role)
			switch it.Role {
			case "user", "assistant", "system":
			case "developer":
				role = wire.RoleSystem
			default:
				return wire.Invalid(param+".role", "%s.role must be one of user, assistant, system, developer", param)
			}
			parts, err := responsesContent(param+".content", it.Content)
			if err != nil {
				return err
			}
			if role == wire.RoleSystem && len(r.Messages) == 0 {
				for _, p := range parts {
					r.System = strings.TrimSpace(r.System + "\n\n" + p.Text)
				}
				continue
			}
			if role == wire.RoleAssistant {
				add(role, parts...)
			} else {
				r.Messages = append(r.Messages, wire.Message{Role: role, Parts: parts})
			}
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return wire.Invalid(param, "%s: a function_call item needs call_id and name", param)
			}
			add(wire.RoleAssistant, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}})
		case "function_call_output":
			if it.CallID == "" {
				return wire.Invalid(param+".call_id", "%s: a function_call_output item needs call_id", param)
			}
			out, err := responsesContent(param+".output", it.Output)
			if err != nil {
				return err
			}
			add(wire.RoleTool, wire.Part{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: it.CallID, Parts: out}})
		case "web_search_call":
			// An earlier turn's search, echoed back: history for the model.
			if it.Action != nil && it.Action.Type == "search" {
				res := &wire.SearchResult{CallID: it.ID}
				for _, s := range it.Action.Sources {
					res.Sources = append(res.Sources, wire.Source{URL: s.URL})
				}
				add(wire.RoleAssistant, wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: it.ID, Name: "web_search", Query: it.Action.Query}}, wire.Part{Kind: wire.PartServerResult, Search: res})
			}
		case "reasoning":
			// The fleet's own seal of a model's reasoning state (seal.go), opened by the
			// ingress for the tenant (Request.OpenReasoning). Other reasoning (often
			// encrypted) belongs to the model that wrote it, which is not the fleet's.
			if p, ok := wire.SealedPart(it.ID, it.EncryptedContent); ok {
				add(wire.RoleAssistant, p)
			}
		case "compaction":
			// A compaction of POST /v1/responses/compact: the turns it stands for.
			m, err := DecodeCompaction(param+".encrypted_content", it.EncryptedContent)
			if err != nil {
				return err
			}
			add(wire.RoleAssistant, m.Parts...)
		case "item_reference":
			// The ingress replaces references by the items (ResolveResponsesInput).
			return wire.Invalid(param+".id", "%s: item %q was not found among this tenant's stored responses", param, wire.Clip(it.ID, 64))
		default:
			return wire.Invalid(param+".type", "input item type %q is not supported by this server", it.Type)
		}
	}
	return answeredCalls(r)
}

// answeredCalls refuses a function_call_output whose call_id names no function_call
// before it: the model would be handed the output of a call it never made.
func answeredCalls(r *wire.Request) error {
	calls := map[string]bool{}
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			switch {
			case p.Kind == wire.PartToolCall:
				calls[p.Call.ID] = true
			case p.Kind == wire.PartToolResult && !calls[p.Result.CallID]:
				return wire.Invalid("input", "No tool call found for function call output with call_id %s: a function_call_output answers a function_call earlier in the conversation.", wire.Clip(p.Result.CallID, 64))
			}
		}
	}
	return nil
}

// responsesContent reads a message content or a function output: a string or parts.
func responsesContent(param string, raw json.RawMessage) ([]wire.Part, error) {
	if wire.IsNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []wire.Part{{Kind: wire.PartText, Text: s}}, nil
	}
	var items []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Refusal  string `json:"refusal"`
		ImageURL string `json:"image_url"`
		FileID   string `json:"file_id"`
		FileData string `json:"file_data"`
		FileURL  string `json:"file_url"`
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, wire.Invalid(param, "'%s' must be a string or an array of content parts", param)
	}
	var parts []wire.Part
	for i, it := range items {
		switch it.Type {
		case "input_text", "output_text", "text":
			parts = append(parts, wire.Part{Kind: wire.PartText, Text: it.Text})
		case "refusal":
			parts = append(parts, wire.Part{Kind: wire.PartText, Text: it.Refusal})
		case "input_image":
			if it.ImageURL == "" {
				return nil, wire.Invalid(fmt.Sprintf("%s[%d]", param, i), "input_image needs image_url on this server (file_id is not supported)")
			}
			parts = append(parts, wire.Part{Kind: wire.PartImage, Image: &wire.Image{URL: it.ImageURL}})
		case "input_file":
			p, err := wire.DecodeFile(fmt.Sprintf("%s[%d]", param, i), it.Filename, it.FileData, it.FileURL, it.FileID)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		default:
			return nil, wire.Invalid(fmt.Sprintf("%s[%d].type", param, i), "content part type %q is not supported by this server", it.Type)
		}
	}
	return parts, nil
}

func responsesTools(r *wire.Request, v json.RawMessage) error {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(v, &tools) != nil {
		return wire.Invalid("tools", "'tools' must be an array of tool objects")
	}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t == nil {
			return wire.Invalid(param, "%s must be an object", param)
		}
		var typ string
		json.Unmarshal(t["type"], &typ)
		switch typ {
		case "function":
			var f wire.Tool
			raw, _ := json.Marshal(t)
			if json.Unmarshal(raw, &f) != nil || f.Name == "" {
				return wire.Invalid(param, "%s: a function tool needs a name", param)
			}
			r.Tools = append(r.Tools, f)
		case "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11":
			o, err := llm.ParseSearchSettings(param, t)
			if err != nil {
				return wire.FromLLM(err)
			}
			r.AddSearch(o)
		case "":
			return wire.Invalid(param+".type", "Missing required parameter: '%s.type'.", param)
		default:
			return wire.Invalid(param+".type", "tool type %q is not supported by this server; it serves function tools and web_search", typ)
		}
	}
	return nil
}

func responsesToolChoice(r *wire.Request, v json.RawMessage) error {
	var mode string
	if json.Unmarshal(v, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
			r.ToolChoice = &wire.ToolChoice{Mode: mode}
			return nil
		}
		return wire.Invalid("tool_choice", "'tool_choice' must be auto, none, required or a tool object")
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(v, &o) != nil {
		return wire.Invalid("tool_choice", "'tool_choice' must be auto, none, required or a tool object")
	}
	switch {
	case o.Type == "function" && o.Name != "":
		r.ToolChoice = &wire.ToolChoice{Mode: "tool", Name: o.Name}
	case strings.HasPrefix(o.Type, "web_search"):
		// The fleet's web_search tool, forced on the first model call that offers it
		// (the chat worker lets the model answer once it has searched).
		r.AddSearch(&llm.SearchOptions{Requested: true, Forced: true})
	default:
		return wire.Invalid("tool_choice", "tool_choice type %q is not supported", o.Type)
	}
	return nil
}

// responsesText maps text.format onto a Chat response_format.
func responsesText(r *wire.Request, v json.RawMessage) error {
	var t struct {
		Format map[string]json.RawMessage `json:"format"`
	}
	if json.Unmarshal(v, &t) != nil {
		return wire.Invalid("text", "'text' must be an object")
	}
	if t.Format == nil {
		return nil
	}
	var typ string
	json.Unmarshal(t.Format["type"], &typ)
	switch typ {
	case "text":
	case "json_object":
		r.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
	case "json_schema":
		schema := map[string]json.RawMessage{}
		for _, k := range []string{"name", "schema", "strict", "description"} {
			if x, ok := t.Format[k]; ok {
				schema[k] = x
			}
		}
		b, _ := json.Marshal(map[string]any{"type": "json_schema", "json_schema": schema})
		r.ResponseFormat = b
	default:
		return wire.Invalid("text.format.type", "text.format.type %q is not supported", typ)
	}
	return nil
}
