// Package llm holds what every model call shares: the chain's Chat request form
// (ChatRequest, which keeps every parameter the fleet does not touch exactly as the
// client sent it), the Caller a chain step calls a model with, errors and their retry
// decision, server-sent events, and a chat completion read whole (ParseCompletion) or
// streamed (ChatStream). The HTTP exchange with a provider is upstream.Caller's.
package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// ChatRequest is a client's chat completion request. Model, Messages, Tools and
// Stream are read; every other field is kept verbatim in Extra and forwarded.
type ChatRequest struct {
	Model    string
	Messages []json.RawMessage
	Tools    []json.RawMessage
	Stream   bool
	// Extra holds the other top-level fields (temperature, max_tokens, tool_choice…).
	Extra map[string]json.RawMessage
	// Search is the request's own web search settings (nil: none declared). They come
	// from web_search_options and search declarations in tools (removed from Tools and
	// Extra: the fleet serves them, the model never sees them).
	Search *SearchOptions
}

// Message is the part of a chat message the fleet reads.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call of an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a call's function name and its arguments (a JSON string).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// RequestError is a request the fleet refuses, with the parameter at fault.
type RequestError struct {
	Param   string
	Message string
}

func (e *RequestError) Error() string { return e.Message }

func badParam(param, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// ParseChatRequest reads and validates a chat completion request body.
func ParseChatRequest(body []byte) (*ChatRequest, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, badParam("", "request body is empty; send a JSON chat completion request")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, badParam("", "request body is not valid JSON: %s", redact.JSONError(err))
	}
	if top == nil {
		return nil, badParam("", "request body must be a JSON object")
	}
	r := &ChatRequest{Extra: make(map[string]json.RawMessage, len(top))}
	for k, v := range top {
		switch k {
		case "model":
			if err := json.Unmarshal(v, &r.Model); err != nil || strings.TrimSpace(r.Model) == "" {
				return nil, badParam("model", "'model' must be a non-empty string")
			}
		case "messages":
			if err := json.Unmarshal(v, &r.Messages); err != nil {
				return nil, badParam("messages", "'messages' must be an array of message objects")
			}
		case "tools":
			if string(v) == "null" {
				continue
			}
			if err := json.Unmarshal(v, &r.Tools); err != nil {
				return nil, badParam("tools", "'tools' must be an array of tool objects")
			}
		case "stream":
			if err := json.Unmarshal(v, &r.Stream); err != nil {
				return nil, badParam("stream", "'stream' must be a boolean")
			}
		case "n":
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n != 1 && string(v) != "null" {
				return nil, badParam("n", "only n=1 is supported")
			}
		case "web_search_options":
			o, err := chatSearchOptions(v)
			if err != nil {
				return nil, err
			}
			r.Search = r.Search.With(o)
		case FleetKey:
			return nil, badParam(FleetKey, "'%s' is reserved for the fleet", FleetKey)
		default:
			r.Extra[k] = v
		}
	}
	if _, ok := top["model"]; !ok {
		return nil, badParam("model", "you must provide a model parameter")
	}
	if _, ok := top["messages"]; !ok || len(r.Messages) == 0 {
		return nil, badParam("messages", "'messages' is required and must not be empty")
	}
	for i, raw := range r.Messages {
		var m Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, badParam(fmt.Sprintf("messages[%d]", i), "messages[%d] is not a valid message object", i)
		}
		if !roles[m.Role] {
			return nil, badParam(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return nil, badParam(fmt.Sprintf("messages[%d].tool_call_id", i), "messages[%d] has role 'tool' but no tool_call_id", i)
		}
	}
	if err := r.takeSearchTools(); err != nil {
		return nil, err
	}
	for i, raw := range r.Tools {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, badParam(fmt.Sprintf("tools[%d]", i), "tools[%d] is not a valid tool object", i)
		}
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return nil, badParam(fmt.Sprintf("tools[%d]", i), "tools[%d] must be {\"type\":\"function\",\"function\":{\"name\":…}}", i)
		}
	}
	return r, nil
}

// FleetKey is the top-level key the fleet's own extensions of a Chat answer go
// under; a client may not send it in a request.
const FleetKey = "searchfleet"

// takeSearchTools moves the search declarations of Tools into Search.
func (r *ChatRequest) takeSearchTools() error {
	kept := r.Tools[:0:0]
	for i, raw := range r.Tools {
		isSearch, o, err := chatSearchTool(fmt.Sprintf("tools[%d]", i), raw)
		if err != nil {
			return err
		}
		if isSearch {
			r.Search = r.Search.With(o)
			continue
		}
		kept = append(kept, raw)
	}
	r.Tools = kept
	return nil
}

// Text returns the text of a message's content: a string, or the text and input_text
// parts of an array, one a line (images and other parts skipped; each part decoded on
// its own, so one odd part does not hide the others).
func Text(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		json.Unmarshal(raw, &s)
		return s
	case '[':
		var parts []json.RawMessage
		if json.Unmarshal(raw, &parts) != nil {
			return ""
		}
		var b strings.Builder
		for _, p := range parts {
			var part struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(p, &part) != nil || part.Text == "" || part.Type != "text" && part.Type != "input_text" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(part.Text)
		}
		return b.String()
	}
	return ""
}
