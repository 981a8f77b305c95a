// Package anthropic is Anthropic Messages in both directions: the codec of the
// clients that speak it to the ingress (Client) and of the main models the fleet calls
// with it (Model).
package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Client is the Anthropic Messages codec (client side).
var Client anthropicCodec

type anthropicCodec struct{}

func (anthropicCodec) Protocol() wire.Protocol { return wire.AnthropicMessages }

// anthropicErrorTypes are Anthropic's error types of HTTP statuses (any other 5xx is
// api_error).
var anthropicErrorTypes = map[int]string{http.StatusUnauthorized: "authentication_error", http.StatusForbidden: "permission_error",
	http.StatusNotFound: "not_found_error", http.StatusRequestEntityTooLarge: "request_too_large", http.StatusTooManyRequests: "rate_limit_error",
	http.StatusGatewayTimeout: "timeout_error", 529: "overloaded_error", http.StatusServiceUnavailable: "overloaded_error"}

// EncodeError renders {"type":"error","error":{"type":…,"message":…}}.
func (anthropicCodec) EncodeError(e *wire.Error) []byte {
	msg := e.Message
	if e.Param != "" && !strings.Contains(msg, e.Param) {
		msg = e.Param + ": " + msg
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": wire.ErrorType(anthropicErrorTypes, e.Status, "api_error"), "message": msg}})
	return b
}

// anthropicServerTools are the web search tool versions the fleet serves.
var anthropicServerTools = map[string]bool{"web_search_20250305": true, "web_search_20260209": true, "web_search_20260318": true}

// anthropicFetchTools are the web fetch tool versions the fleet serves (its
// web_fetch server tool).
var anthropicFetchTools = map[string]bool{"web_fetch_20250910": true, "web_fetch_20260209": true}

// DecodeRequest reads a Messages request: system, content blocks, client tools,
// web_search server tools (max_uses, allowed_domains, blocked_domains, user_location).
func (anthropicCodec) DecodeRequest(body []byte) (*wire.Request, error) {
	top, err := wire.JSONObject(body)
	if err != nil {
		return nil, err
	}
	r := &wire.Request{}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		v := top[k]
		if wire.IsNull(v) {
			continue
		}
		var err error
		switch k {
		case "model":
			if json.Unmarshal(v, &r.Model) != nil || strings.TrimSpace(r.Model) == "" {
				return nil, wire.Invalid(k, "model: Input should be a valid non-empty string")
			}
		case "max_tokens":
			if json.Unmarshal(v, &r.MaxTokens) != nil || r.MaxTokens < 1 {
				return nil, wire.Invalid(k, "max_tokens: Input should be a positive integer")
			}
		case "messages":
			err = anthropicMessages(r, v)
		case "system":
			err = anthropicSystem(r, v)
		case "tools":
			err = anthropicTools(r, v)
		case "tool_choice":
			err = anthropicToolChoice(r, v)
		case "temperature":
			err = wire.DecodeAs(k, v, &r.Temperature, "a number")
		case "top_p":
			err = wire.DecodeAs(k, v, &r.TopP, "a number")
		case "stop_sequences":
			err = wire.DecodeAs(k, v, &r.Stop, "an array of strings")
		case "stream":
			err = wire.DecodeAs(k, v, &r.Stream, "a boolean")
		case "top_k":
			r.Notes = append(r.Notes, "top_k is not honoured by the fleet's model")
		case "thinking":
			r.Reasoning, err = thinkingConfig(v)
		case "metadata", "service_tier":
		default:
			return nil, wire.Invalid(k, "%s: Extra inputs are not permitted", k)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case r.Model == "":
		return nil, wire.Invalid("model", "model: Field required")
	case r.MaxTokens == 0:
		return nil, wire.Invalid("max_tokens", "max_tokens: Field required")
	case len(r.Messages) == 0:
		return nil, wire.Invalid("messages", "messages: Field required (at least one message)")
	}
	return r, nil
}

func anthropicSystem(r *wire.Request, v json.RawMessage) error {
	var s string
	if json.Unmarshal(v, &s) == nil {
		r.System = s
		return nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(v, &blocks) != nil {
		return wire.Invalid("system", "system: Input should be a string or a list of text blocks")
	}
	var texts []string
	for i, b := range blocks {
		if b.Type != "text" {
			return wire.Invalid(fmt.Sprintf("system.%d.type", i), "system.%d: only text blocks are allowed", i)
		}
		texts = append(texts, b.Text)
	}
	r.System = strings.Join(texts, "\n\n")
	return nil
}

// anthropicBlock is a content block of any type, of a request or an answer.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// Title is a document block's (the file's name).
	Title  string `json:"title"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// Thinking, Signature and Data are a thinking or redacted_thinking block's.
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
	// Citations are an answer's text block's.
	Citations []anthropicCitation `json:"citations"`
}

// anthropicCitation is a citation of an answer's text block.
type anthropicCitation struct {
	Type      string `json:"type"`
	URL       string `json:"url"`
	Title     string `json:"title"`
	CitedText string `json:"cited_text"`
}

// anthropicDocument reads a document block: a base64 source (a PDF), a text source
// (plain text) or a url source (a PDF by URL: urlFile), as a file part.
func anthropicDocument(param string, b anthropicBlock) (wire.Part, error) {
	if b.Source == nil {
		return wire.Part{}, wire.Invalid(param+".source", "%s.source: Field required", param)
	}
	switch b.Source.Type {
	case "base64":
		content, err := base64.StdEncoding.DecodeString(b.Source.Data)
		if err != nil {
			return wire.Part{}, wire.Invalid(param+".source.data", "%s.source.data is not valid base64", param)
		}
		return wire.Part{Kind: wire.PartFile, File: &wire.File{Filename: b.Title, MediaType: wire.FileMedia(b.Source.MediaType, b.Title, content), Data: b.Source.Data}}, nil
	case "text":
		return wire.Part{Kind: wire.PartFile, File: &wire.File{Filename: b.Title, MediaType: "text/plain", Data: base64.StdEncoding.EncodeToString([]byte(b.Source.Data))}}, nil
	case "url":
		if b.Source.URL == "" {
			return wire.Part{}, wire.Invalid(param+".source.url", "%s.source.url: Field required", param)
		}
		p, err := wire.URLFile(param+".source.url", b.Title, b.Source.URL)
		if err == nil && p.File.MediaType == "" {
			p.File.MediaType = wire.MediaPDF // a url source is a PDF (URLPDFSourceParam) unless its name says otherwise
		}
		return p, err
	}
	return wire.Part{}, wire.Invalid(param+".source.type", "%s.source.type %q is not supported by this server (send the document as base64, text or url)", param, b.Source.Type)
}

func anthropicMessages(r *wire.Request, v json.RawMessage) error {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(v, &msgs) != nil {
		return wire.Invalid("messages", "messages: Input should be a valid list of message objects")
	}
	for i, m := range msgs {
		param := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			return wire.Invalid(param+".role", "%s.role: Input should be 'user' or 'assistant'", param)
		}
		parts, err := anthropicContent(param+".content", m.Content, m.Role == "assistant")
		if err != nil {
			return err
		}
		r.Messages = append(r.Messages, wire.Message{Role: wire.Role(m.Role), Parts: parts})
	}
	return nil
}

func anthropicContent(param string, raw json.RawMessage, assistant bool) ([]wire.Part, error) {
	if wire.IsNull(raw) {
		return nil, wire.Invalid(param, "%s: Field required", param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []wire.Part{{Kind: wire.PartText, Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, wire.Invalid(param, "%s: Input should be a string or a list of content blocks", param)
	}
	var parts []wire.Part
	for i, b := range blocks {
		bp := fmt.Sprintf("%s.%d", param, i)
		switch b.Type {
		case "text":
			parts = append(parts, wire.Part{Kind: wire.PartText, Text: b.Text})
		case "image":
			if b.Source == nil {
				return nil, wire.Invalid(bp+".source", "%s.source: Field required", bp)
			}
			switch b.Source.Type {
			case "base64":
				parts = append(parts, wire.Part{Kind: wire.PartImage, Image: &wire.Image{MediaType: b.Source.MediaType, Data: b.Source.Data}})
			case "url":
				parts = append(parts, wire.Part{Kind: wire.PartImage, Image: &wire.Image{URL: b.Source.URL}})
			default:
				return nil, wire.Invalid(bp+".source.type", "%s.source.type %q is not supported", bp, b.Source.Type)
			}
		case "document":
			p, err := anthropicDocument(bp, b)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "tool_use":
			if !assistant || b.ID == "" || b.Name == "" {
				return nil, wire.Invalid(bp, "%s: tool_use blocks belong to assistant messages and need id and name", bp)
			}
			args := "{}"
			if !wire.IsNull(b.Input) {
				args = string(b.Input)
			}
			parts = append(parts, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: b.ID, Name: b.Name, Arguments: args}})
		case "tool_result":
			if assistant || b.ToolUseID == "" {
				return nil, wire.Invalid(bp, "%s: tool_result blocks belong to user messages and need tool_use_id", bp)
			}
			var inner []wire.Part
			if !wire.IsNull(b.Content) {
				var err error
				if inner, err = anthropicContent(bp+".content", b.Content, false); err != nil {
					return nil, err
				}
			}
			parts = append(parts, wire.Part{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: b.ToolUseID, Parts: inner, IsError: b.IsError}})
		case "server_tool_use":
			var in struct {
				Query string `json:"query"`
				URL   string `json:"url"`
			}
			json.Unmarshal(b.Input, &in)
			parts = append(parts, wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: b.ID, Name: b.Name, Query: in.Query, URL: in.URL}})
		case "web_search_tool_result":
			parts = append(parts, wire.Part{Kind: wire.PartServerResult, Search: anthropicSearchResult(b.ToolUseID, b.Content)})
		case "thinking", "redacted_thinking":
			// The model's reasoning, kept verbatim: an Anthropic model wants it back,
			// and another model its own, which the block carries.
			if !assistant {
				return nil, wire.Invalid(bp+".type", "%s.type: %s blocks belong to assistant messages", bp, b.Type)
			}
			r := carriedReasoning(b.Signature + b.Data) // another model's, given back (thinkingBlock)
			if r == nil {
				r = &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: b.Thinking, Signature: b.Signature, Redacted: b.Data}
			}
			parts = append(parts, wire.Part{Kind: wire.PartReasoning, Reasoning: r})
		case "web_fetch_tool_result":
			parts = append(parts, wire.Part{Kind: wire.PartServerResult, Search: anthropicFetchHistory(b.ToolUseID, b.Content)})
		case "server_tool_result":
			// Results of server tools the fleet does not run: nothing the model can use.
		default:
			return nil, wire.Invalid(bp+".type", "%s.type: content block type %q is not supported by this server", bp, b.Type)
		}
	}
	return parts, nil
}

func anthropicTools(r *wire.Request, v json.RawMessage) error {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(v, &tools) != nil {
		return wire.Invalid("tools", "tools: Input should be a valid list")
	}
	for i, t := range tools {
		param := fmt.Sprintf("tools.%d", i)
		var typ, name string
		json.Unmarshal(t["type"], &typ)
		json.Unmarshal(t["name"], &name)
		switch {
		case typ == "" || typ == "custom":
			var ct struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"input_schema"`
			}
			raw, _ := json.Marshal(t)
			if json.Unmarshal(raw, &ct) != nil || ct.Name == "" {
				return wire.Invalid(param+".name", "%s.name: Field required", param)
			}
			if wire.IsNull(ct.InputSchema) {
				return wire.Invalid(param+".input_schema", "%s.input_schema: Field required", param)
			}
			r.Tools = append(r.Tools, wire.Tool{Name: ct.Name, Description: ct.Description, Parameters: ct.InputSchema})
		case anthropicServerTools[typ]:
			if name != "web_search" {
				return wire.Invalid(param+".name", "%s.name: Input should be 'web_search'", param)
			}
			if !wire.IsNull(t["allowed_domains"]) && !wire.IsNull(t["blocked_domains"]) {
				return wire.Invalid(param, "%s: Cannot specify both allowed_domains and blocked_domains", param)
			}
			o, err := llm.ParseSearchSettings(param, t)
			if err != nil {
				return wire.FromLLM(err)
			}
			r.AddSearch(o)
		case anthropicFetchTools[typ]:
			if name != "web_fetch" {
				return wire.Invalid(param+".name", "%s.name: Input should be 'web_fetch'", param)
			}
			var ft struct {
				MaxUses *int `json:"max_uses"`
			}
			raw, _ := json.Marshal(t)
			if json.Unmarshal(raw, &ft) != nil || ft.MaxUses != nil && *ft.MaxUses < 1 {
				return wire.Invalid(param+".max_uses", "%s.max_uses: Input should be a positive integer", param)
			}
			o := &llm.SearchOptions{Fetch: true}
			if ft.MaxUses != nil {
				o.MaxFetches = *ft.MaxUses
			}
			if !wire.IsNull(t["allowed_domains"]) || !wire.IsNull(t["blocked_domains"]) {
				o.Unhonoured = append(o.Unhonoured, param+": web_fetch domain filters are not honoured")
			}
			r.AddSearch(o)
		case strings.HasPrefix(typ, "web_fetch_"):
			r.Notes = append(r.Notes, param+" ("+typ+") is not served: the model cannot fetch pages with this tool version")
		default:
			return wire.Invalid(param+".type", "%s.type: tool type %q is not supported by this server; it serves custom tools and web_search", param, typ)
		}
	}
	return nil
}

func anthropicToolChoice(r *wire.Request, v json.RawMessage) error {
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if json.Unmarshal(v, &tc) != nil {
		return wire.Invalid("tool_choice", "tool_choice: Input should be an object")
	}
	switch tc.Type {
	case "auto", "none":
		r.ToolChoice = &wire.ToolChoice{Mode: tc.Type}
	case "any":
		r.ToolChoice = &wire.ToolChoice{Mode: "required"}
	case "tool":
		if tc.Name == "" {
			return wire.Invalid("tool_choice.name", "tool_choice.name: Field required")
		}
		if tc.Name == "web_search" {
			// The server tool, forced on the first model call that offers it.
			r.AddSearch(&llm.SearchOptions{Requested: true, Forced: true})
			break
		}
		r.ToolChoice = &wire.ToolChoice{Mode: "tool", Name: tc.Name}
	default:
		return wire.Invalid("tool_choice.type", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
	}
	if tc.DisableParallelToolUse != nil && *tc.DisableParallelToolUse {
		f := false
		r.ParallelToolCalls = &f
	}
	return nil
}
