package wire

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Responses is the OpenAI Responses API codec (client side).
var Responses responsesCodec

type responsesCodec struct{}

func (responsesCodec) Protocol() Protocol { return OpenAIResponses }

func (responsesCodec) EncodeError(e *Error) []byte { return openAIError(e) }

// responsesIgnored are parameters accepted without effect on the answer (the answer
// echoes the ones a response object repeats): the fleet always includes search
// sources, has no prompt cache and one service tier.
var responsesIgnored = map[string]bool{"include": true, "user": true, "stream_options": true}

// responsesEchoed are parameters a response object repeats that the fleet does not
// pass to its model: a value other than 0 is noted as not honoured.
var responsesEchoed = map[string]bool{"presence_penalty": true, "frequency_penalty": true, "top_logprobs": true}

// DecodeRequest reads a Responses request: input as a string or items (messages,
// function_call, function_call_output, earlier web_search_call and reasoning items, a
// compaction of POST /v1/responses/compact), instructions, function tools, web_search /
// web_search_preview tools.
func (responsesCodec) DecodeRequest(body []byte) (*Request, error) {
	top, err := jsonObject(body)
	if err != nil {
		return nil, err
	}
	r := &Request{}
	if v, ok := top["model"]; ok && !isNull(v) {
		// Read first: errors about the input name the model.
		if json.Unmarshal(v, &r.Model) != nil || strings.TrimSpace(r.Model) == "" {
			return nil, Invalid("model", "'model' must be a non-empty string")
		}
	}
	maxToolCalls := 0
	for _, k := range slices.Sorted(maps.Keys(top)) {
		v := top[k]
		if isNull(v) {
			continue
		}
		var err error
		switch k {
		case "model":
		case "input":
			err = r.responsesInput(v)
		case "instructions":
			if json.Unmarshal(v, &r.System) != nil {
				return nil, Invalid(k, "'instructions' must be a string")
			}
		case "tools":
			err = r.responsesTools(v)
		case "tool_choice":
			err = r.responsesToolChoice(v)
		case "max_output_tokens":
			if json.Unmarshal(v, &r.MaxTokens) != nil || r.MaxTokens < 1 {
				return nil, Invalid(k, "'max_output_tokens' must be a positive integer")
			}
		case "max_tool_calls":
			if json.Unmarshal(v, &maxToolCalls) != nil || maxToolCalls < 1 {
				return nil, Invalid(k, "'max_tool_calls' must be a positive integer")
			}
		case "presence_penalty", "frequency_penalty":
			var f float64
			if json.Unmarshal(v, &f) != nil || f < -2 || f > 2 {
				return nil, Invalid(k, "'%s' must be a number from -2 to 2", k)
			}
		case "top_logprobs":
			var n int
			if json.Unmarshal(v, &n) != nil || n < 0 || n > 20 {
				return nil, Invalid(k, "'top_logprobs' must be an integer from 0 to 20")
			}
		case "store":
			err = decodeAs(k, v, new(bool), "a boolean")
		case "service_tier":
			var t string
			if json.Unmarshal(v, &t) != nil || !slices.Contains([]string{"auto", "default", "flex", "priority"}, t) {
				return nil, Invalid(k, "'service_tier' must be one of auto, default, flex, priority")
			}
		case "truncation":
			var t string
			if json.Unmarshal(v, &t) != nil || t != "auto" && t != "disabled" {
				return nil, Invalid(k, "'truncation' must be auto or disabled")
			}
		case "safety_identifier", "prompt_cache_key":
			var t string
			if json.Unmarshal(v, &t) != nil || len(t) > 64 {
				return nil, Invalid(k, "'%s' must be a string of at most 64 characters", k)
			}
		case "metadata":
			var m map[string]string
			if json.Unmarshal(v, &m) != nil || len(m) > 16 {
				return nil, Invalid(k, "'metadata' must be an object of at most 16 string values")
			}
			for mk, mv := range m {
				if len(mk) > 64 || len(mv) > 512 {
					return nil, Invalid(k, "'metadata' keys are at most 64 characters and values at most 512")
				}
			}
		case "temperature":
			err = decodeAs(k, v, &r.Temperature, "a number")
		case "top_p":
			err = decodeAs(k, v, &r.TopP, "a number")
		case "parallel_tool_calls":
			err = decodeAs(k, v, &r.ParallelToolCalls, "a boolean")
		case "stream":
			err = decodeAs(k, v, &r.Stream, "a boolean")
		case "background":
			err = decodeAs(k, v, &r.Background, "a boolean")
		case "text":
			err = r.responsesText(v)
		case "reasoning":
			r.Reasoning, err = responsesReasoning(v)
		case "previous_response_id":
			// The ingress resolves it into the input before decoding (ResolveResponsesInput).
			return nil, Invalid(k, "'previous_response_id' could not be resolved on this server")
		case "conversation", "prompt":
			return nil, Invalid(k, "'%s' is not supported by this server; send the conversation in 'input' or name it with 'previous_response_id'", k)
		default:
			if !responsesIgnored[k] {
				return nil, Invalid(k, "Unknown parameter: '%s'.", k)
			}
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
		if r.Search == nil {
			r.Search = &llm.SearchOptions{}
		}
		r.Search.Merge(&llm.SearchOptions{MaxUses: maxToolCalls, MaxFetches: maxToolCalls})
	}
	if r.Model == "" {
		return nil, Invalid("model", "Missing required parameter: 'model'.")
	}
	if len(r.Messages) == 0 {
		return nil, Invalid("input", "Missing required parameter: 'input'.")
	}
	if r.Stream && r.Background {
		return nil, Invalid("stream", "'stream' and 'background' cannot both be true on this server")
	}
	return r, nil
}

func decodeAs(param string, v json.RawMessage, dst any, what string) error {
	if json.Unmarshal(v, dst) != nil {
		return Invalid(param, "'%s' must be %s", param, what)
	}
	return nil
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
	// EncryptedContent is a compaction item's (compaction.go).
	EncryptedContent string `json:"encrypted_content"`
	Action           *struct {
		Type    string `json:"type"`
		Query   string `json:"query"`
		Sources []struct {
			URL string `json:"url"`
		} `json:"sources"`
	} `json:"action"`
}

func (r *Request) responsesInput(v json.RawMessage) error {
	var s string
	if json.Unmarshal(v, &s) == nil {
		r.Messages = append(r.Messages, Message{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: s}}})
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		return Invalid("input", "'input' must be a string or an array of input items")
	}
	// add appends parts to the last message when it has the role, else a new message.
	add := func(role Role, p ...Part) {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role && role != RoleUser {
			r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, p...)
			return
		}
		r.Messages = append(r.Messages, Message{Role: role, Parts: p})
	}
	for i, raw := range items {
		param := fmt.Sprintf("input[%d]", i)
		var it responsesItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return Invalid(param, "%s is not a valid input item: %s", param, redact.JSONError(err))
		}
		switch it.Type {
		case "message", "":
			role := Role(it.Role)
			switch it.Role {
			case "user", "assistant", "system":
			case "developer":
				role = RoleSystem
			default:
				return Invalid(param+".role", "%s.role must be one of user, assistant, system, developer", param)
			}
			parts, err := responsesContent(param+".content", it.Content)
			if err != nil {
				return err
			}
			if role == RoleSystem && len(r.Messages) == 0 {
				for _, p := range parts {
					r.System = strings.TrimSpace(r.System + "\n\n" + p.Text)
				}
				continue
			}
			if role == RoleAssistant {
				add(role, parts...)
			} else {
				r.Messages = append(r.Messages, Message{Role: role, Parts: parts})
			}
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return Invalid(param, "%s: a function_call item needs call_id and name", param)
			}
			add(RoleAssistant, Part{Kind: PartToolCall, Call: &ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}})
		case "function_call_output":
			if it.CallID == "" {
				return Invalid(param+".call_id", "%s: a function_call_output item needs call_id", param)
			}
			out, err := responsesContent(param+".output", it.Output)
			if err != nil {
				return err
			}
			add(RoleTool, Part{Kind: PartToolResult, Result: &ToolResult{CallID: it.CallID, Parts: out}})
		case "web_search_call":
			// An earlier turn's search, echoed back: history for the model.
			if it.Action != nil && it.Action.Type == "search" {
				res := &SearchResult{CallID: it.ID}
				for _, s := range it.Action.Sources {
					res.Sources = append(res.Sources, Source{URL: s.URL})
				}
				add(RoleAssistant, Part{Kind: PartServerCall, Server: &ServerCall{ID: it.ID, Name: "web_search", Query: it.Action.Query}}, Part{Kind: PartServerResult, Search: res})
			}
		case "reasoning":
			// Reasoning (often encrypted) belongs to the model that wrote it; the fleet's
			// model cannot read it.
		case "compaction":
			// A compaction of POST /v1/responses/compact: the turns it stands for.
			m, err := DecodeCompaction(param+".encrypted_content", it.EncryptedContent)
			if err != nil {
				return err
			}
			add(RoleAssistant, m.Parts...)
		case "item_reference":
			// The ingress replaces references by the items (ResolveResponsesInput).
			return Invalid(param+".id", "%s: item %q was not found among this tenant's stored responses", param, clip(it.ID, 64))
		default:
			return Invalid(param+".type", "input item type %q is not supported by this server", it.Type)
		}
	}
	return r.answeredCalls()
}

// answeredCalls refuses a function_call_output whose call_id names no function_call
// before it: the model would be handed the output of a call it never made.
func (r *Request) answeredCalls() error {
	calls := map[string]bool{}
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			switch {
			case p.Kind == PartToolCall:
				calls[p.Call.ID] = true
			case p.Kind == PartToolResult && !calls[p.Result.CallID]:
				return Invalid("input", "No tool call found for function call output with call_id %s: a function_call_output answers a function_call earlier in the conversation.", clip(p.Result.CallID, 64))
			}
		}
	}
	return nil
}

// responsesContent reads a message content or a function output: a string or parts.
func responsesContent(param string, raw json.RawMessage) ([]Part, error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Part{{Kind: PartText, Text: s}}, nil
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
		return nil, Invalid(param, "'%s' must be a string or an array of content parts", param)
	}
	var parts []Part
	for i, it := range items {
		switch it.Type {
		case "input_text", "output_text", "text":
			parts = append(parts, Part{Kind: PartText, Text: it.Text})
		case "refusal":
			parts = append(parts, Part{Kind: PartText, Text: it.Refusal})
		case "input_image":
			if it.ImageURL == "" {
				return nil, Invalid(fmt.Sprintf("%s[%d]", param, i), "input_image needs image_url on this server (file_id is not supported)")
			}
			parts = append(parts, Part{Kind: PartImage, Image: &Image{URL: it.ImageURL}})
		case "input_file":
			p, err := decodeFile(fmt.Sprintf("%s[%d]", param, i), it.Filename, it.FileData, it.FileURL, it.FileID)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		default:
			return nil, Invalid(fmt.Sprintf("%s[%d].type", param, i), "content part type %q is not supported by this server", it.Type)
		}
	}
	return parts, nil
}

func (r *Request) responsesTools(v json.RawMessage) error {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(v, &tools) != nil {
		return Invalid("tools", "'tools' must be an array of tool objects")
	}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t == nil {
			return Invalid(param, "%s must be an object", param)
		}
		var typ string
		json.Unmarshal(t["type"], &typ)
		switch typ {
		case "function":
			var f struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			}
			raw, _ := json.Marshal(t)
			if json.Unmarshal(raw, &f) != nil || f.Name == "" {
				return Invalid(param, "%s: a function tool needs a name", param)
			}
			r.Tools = append(r.Tools, Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters, Strict: f.Strict})
		case "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11":
			o, err := llm.ParseSearchSettings(param, t)
			if err != nil {
				return fromLLM(err)
			}
			if r.Search == nil {
				r.Search = &llm.SearchOptions{}
			}
			r.Search.Merge(o)
		case "":
			return Invalid(param+".type", "Missing required parameter: '%s.type'.", param)
		default:
			return Invalid(param+".type", "tool type %q is not supported by this server; it serves function tools and web_search", typ)
		}
	}
	return nil
}

func (r *Request) responsesToolChoice(v json.RawMessage) error {
	var mode string
	if json.Unmarshal(v, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
			r.ToolChoice = &ToolChoice{Mode: mode}
			return nil
		}
		return Invalid("tool_choice", "'tool_choice' must be auto, none, required or a tool object")
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(v, &o) != nil {
		return Invalid("tool_choice", "'tool_choice' must be auto, none, required or a tool object")
	}
	switch {
	case o.Type == "function" && o.Name != "":
		r.ToolChoice = &ToolChoice{Mode: "tool", Name: o.Name}
	case strings.HasPrefix(o.Type, "web_search"):
		// The fleet's web_search tool, forced on the first model call that offers it
		// (the chat worker lets the model answer once it has searched).
		if r.Search == nil {
			r.Search = &llm.SearchOptions{}
		}
		r.Search.Requested, r.Search.Forced = true, true
	default:
		return Invalid("tool_choice", "tool_choice type %q is not supported", o.Type)
	}
	return nil
}

// responsesText maps text.format onto a Chat response_format.
func (r *Request) responsesText(v json.RawMessage) error {
	var t struct {
		Format map[string]json.RawMessage `json:"format"`
	}
	if json.Unmarshal(v, &t) != nil {
		return Invalid("text", "'text' must be an object")
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
		return Invalid("text.format.type", "text.format.type %q is not supported", typ)
	}
	return nil
}

// responsesOutput renders a response's output items.
func responsesOutput(r *Response) []any {
	out := []any{}
	results := map[string]*SearchResult{}
	for _, p := range r.Content {
		if p.Kind == PartServerResult {
			results[p.Search.CallID] = p.Search
		}
	}
	var text []Part
	for _, p := range r.Content {
		switch p.Kind {
		case PartServerCall:
			out = append(out, webSearchItem(p.Server, results[p.Server.ID], ""))
		case PartText:
			text = append(text, p)
		}
	}
	for _, it := range reasoningOutput(r) {
		out = append(out, it)
	}
	if len(text) > 0 || r.Stop != StopToolUse {
		out = append(out, messageItem(r, text, "completed"))
	}
	for _, p := range r.Content {
		if p.Kind == PartToolCall {
			out = append(out, functionCallItem(p.Call))
		}
	}
	return out
}

func webSearchItem(c *ServerCall, res *SearchResult, status string) map[string]any {
	sources := []any{}
	if status == "" {
		status = "completed"
		if res != nil && res.Error != nil {
			status = "failed"
		}
	}
	if res != nil {
		for _, s := range res.Sources {
			src := map[string]string{"type": "url", "url": s.URL}
			if s.Title != "" {
				// An addition to OpenAI's {type, url}: the SDKs keep unknown fields.
				src["title"] = s.Title
			}
			sources = append(sources, src)
		}
	}
	if c.IsFetch() {
		// A fetch is the Responses web_search_call's open_page action.
		return map[string]any{"type": "web_search_call", "id": "ws_" + c.ID, "status": status,
			"action": map[string]any{"type": "open_page", "url": c.URL}}
	}
	return map[string]any{"type": "web_search_call", "id": "ws_" + c.ID, "status": status,
		"action": map[string]any{"type": "search", "query": c.Query, "sources": sources}}
}

func functionCallItem(c *ToolCall) map[string]any {
	return map[string]any{"type": "function_call", "id": "fc_" + idToken(c.ID), "call_id": c.ID, "name": c.Name, "arguments": c.Arguments, "status": "completed"}
}

func messageID(r *Response) string { return "msg_" + idToken(r.ID) }

// outputText joins text parts and turns their citations into url_citation
// annotations with character offsets into the joined text.
func outputText(text []Part) map[string]any {
	var b strings.Builder
	anns := []any{}
	chars := 0
	for _, p := range text {
		n := utf8.RuneCountInString(p.Text)
		for _, c := range p.Citations {
			start, end := c.Start, c.End
			if start < 0 {
				start, end = 0, n
			}
			anns = append(anns, map[string]any{"type": "url_citation", "start_index": chars + start, "end_index": chars + end, "url": c.URL, "title": c.Title})
		}
		b.WriteString(p.Text)
		chars += n
	}
	return map[string]any{"type": "output_text", "text": b.String(), "annotations": anns, "logprobs": []any{}}
}

func messageItem(r *Response, text []Part, status string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = append(content, outputText(text))
	}
	return map[string]any{"type": "message", "id": messageID(r), "status": status, "role": "assistant", "content": content}
}

// responseObject renders r as a Responses response object (every field of Open
// Responses' ResponseResource, with its type); output as given. The request's settings
// come from r.Echo, else their defaults.
func responseObject(r *Response, output []any) map[string]any {
	status := string(r.Status)
	if status == "" {
		status = string(StatusCompleted)
	}
	var incomplete, errBody, completedAt any
	if r.Status == StatusCompleted || r.Status == "" {
		switch r.Stop {
		case StopMaxTokens:
			status, incomplete = "incomplete", map[string]string{"reason": "max_output_tokens"}
		case StopRefusal:
			status, incomplete = "incomplete", map[string]string{"reason": "content_filter"}
		}
		finished := r.Finished
		if finished.IsZero() {
			finished = r.Created
		}
		completedAt = finished.Unix()
	}
	if r.Error != nil {
		code := r.Error.Code
		if code == "" {
			code = "server_error"
		}
		errBody = map[string]string{"code": code, "message": r.Error.Message}
	}
	o := map[string]any{
		"id": r.ID, "object": "response", "created_at": r.Created.Unix(), "completed_at": completedAt, "status": status, "model": r.Model,
		"output": output, "error": errBody, "incomplete_details": incomplete,
		"usage": withSpend(map[string]any{"input_tokens": r.Usage.InputTokens, "input_tokens_details": map[string]int{"cached_tokens": 0},
			"output_tokens": r.Usage.OutputTokens, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
			"total_tokens": r.Usage.InputTokens + r.Usage.OutputTokens}, r.Usage),
		"tool_usage": map[string]any{"web_search": map[string]int{"num_requests": r.Usage.WebSearches}},
	}
	for _, f := range responsesEchoFields {
		if v, ok := r.Echo[f.key]; ok {
			o[f.key] = v
		} else {
			o[f.key] = json.RawMessage(f.def)
		}
	}
	if r.Status != StatusCompleted && r.Status != "" {
		o["usage"] = nil
	}
	if ext := extension(r); ext != nil {
		o["searchfleet"] = ext
	}
	return o
}

// responsesEchoFields are the request's settings a response object repeats, with the
// value each takes when the request left it out (the model's defaults as OpenAI
// reports them).
var responsesEchoFields = []struct{ key, def string }{
	{"previous_response_id", "null"}, {"instructions", "null"}, {"tools", "[]"}, {"tool_choice", `"auto"`},
	{"truncation", `"disabled"`}, {"parallel_tool_calls", "true"}, {"text", `{"format":{"type":"text"}}`},
	{"temperature", "1"}, {"top_p", "1"}, {"presence_penalty", "0"}, {"frequency_penalty", "0"}, {"top_logprobs", "0"},
	{"reasoning", `{"effort":null,"summary":null}`}, {"max_output_tokens", "null"}, {"max_tool_calls", "null"},
	{"store", "true"}, {"background", "false"}, {"service_tier", `"default"`}, {"metadata", "{}"},
	{"safety_identifier", "null"}, {"prompt_cache_key", "null"},
}

// ResponsesEcho returns what a response object repeats of a Responses request body
// (one DecodeRequest accepted): each echoed field the request set, in the shape the
// response object gives it. Function tools get their optional fields (null when not
// sent), web_search tools their search_context_size, reasoning both its fields, and a
// service_tier of auto the tier that served it (default).
func ResponsesEcho(body []byte) map[string]json.RawMessage {
	top, err := jsonObject(body)
	if err != nil {
		return nil
	}
	echo := map[string]json.RawMessage{}
	for _, f := range responsesEchoFields {
		v, ok := top[f.key]
		if !ok || isNull(v) {
			continue
		}
		switch f.key {
		case "tools":
			v = echoTools(v)
		case "reasoning":
			v = withKeys(v, map[string]string{"effort": "null", "summary": "null"})
		case "text":
			v = echoText(v)
		case "service_tier":
			if string(v) == `"auto"` {
				v = json.RawMessage(`"default"`)
			}
		}
		echo[f.key] = v
	}
	return echo
}

// withKeys returns the object v with the keys of defs it lacks (or has null) set to
// their default.
func withKeys(v json.RawMessage, defs map[string]string) json.RawMessage {
	var o map[string]json.RawMessage
	if json.Unmarshal(v, &o) != nil || o == nil {
		return v
	}
	for k, d := range defs {
		if isNull(o[k]) {
			o[k] = json.RawMessage(d)
		}
	}
	b, err := json.Marshal(o)
	if err != nil {
		return v
	}
	return b
}

// echoText is text with its format, a json_schema format with its optional fields
// (description null, strict false when not sent).
func echoText(v json.RawMessage) json.RawMessage {
	var t map[string]json.RawMessage
	if json.Unmarshal(v, &t) != nil || t == nil {
		return v
	}
	if isNull(t["format"]) {
		t["format"] = json.RawMessage(`{"type":"text"}`)
	}
	var f struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(t["format"], &f) == nil && f.Type == "json_schema" {
		t["format"] = withKeys(t["format"], map[string]string{"description": "null", "strict": "false"})
	}
	b, err := json.Marshal(t)
	if err != nil {
		return v
	}
	return b
}

func echoTools(v json.RawMessage) json.RawMessage {
	var tools []json.RawMessage
	if json.Unmarshal(v, &tools) != nil {
		return v
	}
	out := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		var typ struct {
			Type string `json:"type"`
		}
		json.Unmarshal(t, &typ)
		switch {
		case typ.Type == "function":
			t = withKeys(t, map[string]string{"description": "null", "parameters": "null", "strict": "null"})
		case strings.HasPrefix(typ.Type, "web_search"):
			t = withKeys(t, map[string]string{"search_context_size": `"medium"`})
		}
		out = append(out, t)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return v
	}
	return b
}

// EncodeResponse renders r as a Responses response: a web_search_call item per search
// (action search with its query and sources; status failed when it failed), the
// model's reasoning summaries as reasoning items (reasoningOutput), the message item with output_text and url_citation annotations, function_call items.
func (responsesCodec) EncodeResponse(r *Response) ([]byte, error) {
	output := []any{}
	if r.Status == StatusCompleted || r.Status == "" {
		output = responsesOutput(r)
	}
	return json.Marshal(responseObject(r, output))
}

func (responsesCodec) NewStream() Stream { return &responsesStream{} }

// EncodeError renders the error a stream that has sent nothing answers with.
func (*responsesStream) EncodeError(e *Error) []byte { return openAIError(e) }

// responsesStream renders an answer as the Responses event sequence, each event with
// its sequence_number: a web_search_call item per search as it starts (in_progress,
// searching) and ends (completed, with its sources), the message item whose text
// arrives as output_text.delta events, its annotations when the answer is complete,
// then response.completed with the whole response.
type responsesStream struct {
	seq     int
	next    int            // the next output_index
	calls   map[string]int // a server call's output_index
	queries map[string]*ServerCall
	done    map[string]bool // the calls whose item is done
	msg     int             // the message item's output_index (-1: not yet added)
	sent    string          // the text sent
	// holdText keeps the message item for Finish: the request asked for a reasoning
	// summary, and the reasoning items, known only when the answer is, come before
	// the message in the answer's output (responsesOutput), so they must be sent
	// before it too. Searches still stream as they run.
	holdText bool
}

func (s *responsesStream) ev(typ string, fields map[string]any) Event {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, _ := json.Marshal(fields)
	return Event{Name: typ, Data: b}
}

func (s *responsesStream) Start(r *Response) []Event {
	s.calls, s.queries, s.done, s.msg = map[string]int{}, map[string]*ServerCall{}, map[string]bool{}, -1
	s.holdText = summaryAsked(r.Echo)
	rr := *r
	rr.Status = StatusInProgress
	o := responseObject(&rr, []any{})
	return []Event{s.ev("response.created", map[string]any{"response": o}), s.ev("response.in_progress", map[string]any{"response": o})}
}

func (s *responsesStream) KeepAlive() []Event { return []Event{{}} }

// search adds a web_search_call item: in progress, searching.
func (s *responsesStream) search(evs []Event, c *ServerCall) []Event {
	idx := s.next
	s.next++
	s.calls[c.ID], s.queries[c.ID] = idx, c
	id := "ws_" + c.ID
	added := map[string]any{"type": "web_search_call", "id": id, "status": "in_progress", "action": map[string]any{"type": "search", "query": c.Query}}
	evs = append(evs, s.ev("response.output_item.added", map[string]any{"output_index": idx, "item": added}))
	for _, phase := range []string{"in_progress", "searching"} {
		evs = append(evs, s.ev("response.web_search_call."+phase, map[string]any{"output_index": idx, "item_id": id}))
	}
	return evs
}

// searched completes a web_search_call item.
func (s *responsesStream) searched(evs []Event, res *SearchResult) []Event {
	idx, ok := s.calls[res.CallID]
	if !ok || s.done[res.CallID] {
		return evs
	}
	s.done[res.CallID] = true
	item := webSearchItem(s.queries[res.CallID], res, "")
	evs = append(evs, s.ev("response.web_search_call.completed", map[string]any{"output_index": idx, "item_id": item["id"]}))
	return append(evs, s.ev("response.output_item.done", map[string]any{"output_index": idx, "item": item}))
}

func (s *responsesStream) loc(r *Response, m map[string]any) map[string]any {
	m["item_id"], m["output_index"], m["content_index"] = messageID(r), s.msg, 0
	return m
}

// text opens the message item and sends what text adds to the text sent, if it
// continues it; final (the answer) is sent past what it shares with it in any case.
func (s *responsesStream) text(evs []Event, r *Response, text string, final bool) []Event {
	if s.msg < 0 {
		s.msg = s.next
		s.next++
		added := map[string]any{"type": "message", "id": messageID(r), "status": "in_progress", "role": "assistant", "content": []any{}}
		evs = append(evs, s.ev("response.output_item.added", map[string]any{"output_index": s.msg, "item": added}))
		evs = append(evs, s.ev("response.content_part.added", s.loc(r, map[string]any{"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})))
	}
	rest, ok := strings.CutPrefix(text, s.sent)
	if !ok && final {
		rest = text[commonPrefix(text, s.sent):]
	}
	if rest != "" && (ok || final) {
		evs = append(evs, s.ev("response.output_text.delta", s.loc(r, map[string]any{"delta": rest, "logprobs": []any{}})))
		s.sent = text
	}
	return evs
}

func (s *responsesStream) Update(r *Response) []Event {
	var evs []Event
	for _, p := range r.Content {
		switch p.Kind {
		case PartServerCall:
			// A search that starts after the text (a model that wrote before it
			// searched) cannot be put before the message item: Finish adds it.
			if _, ok := s.calls[p.Server.ID]; !ok && s.msg < 0 {
				evs = s.search(evs, p.Server)
			}
		case PartServerResult:
			evs = s.searched(evs, p.Search)
		case PartText:
			if !s.holdText {
				evs = s.text(evs, r, p.Text, false)
			}
		}
	}
	return evs
}

func (s *responsesStream) Finish(r *Response) []Event {
	var evs []Event
	final := responsesOutput(r)
	if s.msg >= 0 {
		final = reasoningAfterMessage(final)
	}
	results := map[string]*SearchResult{}
	for _, p := range r.Content {
		switch p.Kind {
		case PartServerCall:
			if _, ok := s.calls[p.Server.ID]; !ok {
				evs = s.search(evs, p.Server)
			}
		case PartServerResult:
			results[p.Search.CallID] = p.Search
		}
	}
	for _, p := range r.Content {
		if p.Kind == PartServerCall {
			res := results[p.Server.ID]
			if res == nil {
				res = &SearchResult{CallID: p.Server.ID, Sources: []Source{}}
			}
			evs = s.searched(evs, res)
		}
	}
	for _, item := range final {
		it := item.(map[string]any)
		id, _ := it["id"].(string)
		switch it["type"] {
		case "message":
			part := it["content"].([]any)[0].(map[string]any)
			text := part["text"].(string)
			evs = s.text(evs, r, text, true)
			for n, a := range part["annotations"].([]any) {
				evs = append(evs, s.ev("response.output_text.annotation.added", s.loc(r, map[string]any{"annotation_index": n, "annotation": a})))
			}
			evs = append(evs, s.ev("response.output_text.done", s.loc(r, map[string]any{"text": text, "logprobs": []any{}})))
			evs = append(evs, s.ev("response.content_part.done", s.loc(r, map[string]any{"part": part})))
			evs = append(evs, s.ev("response.output_item.done", map[string]any{"output_index": s.msg, "item": it}))
		case "reasoning":
			evs = s.reasoning(evs, it)
		case "function_call":
			idx := s.next
			s.next++
			added := map[string]any{}
			for k, v := range it {
				added[k] = v
			}
			added["arguments"], added["status"] = "", "in_progress"
			evs = append(evs, s.ev("response.output_item.added", map[string]any{"output_index": idx, "item": added}))
			evs = append(evs, s.ev("response.function_call_arguments.delta", map[string]any{"output_index": idx, "item_id": id, "delta": it["arguments"]}))
			evs = append(evs, s.ev("response.function_call_arguments.done", map[string]any{"output_index": idx, "item_id": id, "arguments": it["arguments"], "name": it["name"]}))
			evs = append(evs, s.ev("response.output_item.done", map[string]any{"output_index": idx, "item": it}))
		}
	}
	typ := "response.completed"
	o := responseObject(r, final)
	if o["status"] == "incomplete" {
		typ = "response.incomplete"
	}
	return append(evs, s.ev(typ, map[string]any{"response": o}))
}

// reasoningAfterMessage moves the reasoning items of output to after the message item:
// a stream that already opened the message (its text streamed as the model wrote it,
// before its reasoning was known: no summary was asked for, so none was expected)
// adds them after it, and the output says so.
func reasoningAfterMessage(output []any) []any {
	var reasoning, rest []any
	for _, it := range output {
		if it.(map[string]any)["type"] == "reasoning" {
			reasoning = append(reasoning, it)
			continue
		}
		rest = append(rest, it)
	}
	if len(reasoning) == 0 {
		return output
	}
	for i, it := range rest {
		if it.(map[string]any)["type"] == "message" {
			return append(append(rest[:i+1:i+1], reasoning...), rest[i+1:]...)
		}
	}
	return append(rest, reasoning...)
}

// reasoning sends a reasoning item as OpenAI streams one: added with an empty
// summary, then each summary part added, its text as one delta, done, then the item
// done.
func (s *responsesStream) reasoning(evs []Event, it map[string]any) []Event {
	idx := s.next
	s.next++
	id := it["id"]
	evs = append(evs, s.ev("response.output_item.added", map[string]any{"output_index": idx,
		"item": map[string]any{"type": "reasoning", "id": id, "summary": []any{}}}))
	for n, part := range it["summary"].([]any) {
		text := part.(map[string]any)["text"].(string)
		at := func(m map[string]any) map[string]any {
			m["item_id"], m["output_index"], m["summary_index"] = id, idx, n
			return m
		}
		evs = append(evs, s.ev("response.reasoning_summary_part.added", at(map[string]any{"part": summaryText("")})))
		evs = append(evs, s.ev("response.reasoning_summary_text.delta", at(map[string]any{"delta": text})))
		evs = append(evs, s.ev("response.reasoning_summary_text.done", at(map[string]any{"text": text})))
		evs = append(evs, s.ev("response.reasoning_summary_part.done", at(map[string]any{"part": summaryText(text)})))
	}
	return append(evs, s.ev("response.output_item.done", map[string]any{"output_index": idx, "item": it}))
}

func (s *responsesStream) Fail(r *Response, e *Error) []Event {
	rr := *r
	rr.Status, rr.Error = StatusFailed, e
	if e.Status == http.StatusGatewayTimeout && e.Code == "" {
		rr.Error = &Error{Status: e.Status, Code: "timeout", Message: e.Message}
	}
	return []Event{s.ev("response.failed", map[string]any{"response": responseObject(&rr, []any{})})}
}
