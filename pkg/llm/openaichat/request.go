// Package openaichat is OpenAI Chat Completions in both directions: the codec of the
// clients that speak it to the ingress (Client) and of the main models the fleet calls
// with it (Model, and Kimi and GLM with their own search).
package openaichat

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Client is the OpenAI Chat Completions codec, for clients and for models.
var Client chatCodec

type chatCodec struct{}

func (chatCodec) Protocol() wire.Protocol { return wire.OpenAIChat }

func (chatCodec) EncodeError(e *wire.Error) []byte { return wire.OpenAIError(e) }

// chatMessage is a Chat message as the codec reads it.
type chatMessage struct {
	llm.Message
	Name string `json:"name"`
	// ReasoningContent and Reasoning are the model's reasoning (wire.ChatReasoning).
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Reasoning        json.RawMessage `json:"searchfleet_reasoning,omitempty"`
}

// DecodeRequest reads a Chat request (validated as llm.ParseChatRequest validates the
// chat endpoint's requests): system and developer messages before the first turn
// become System, fleet search declarations become Search, the parameters the
// canonical model does not name stay in Params.
func (chatCodec) DecodeRequest(body []byte) (*wire.Request, error) {
	cr, err := llm.ParseChatRequest(body)
	if err != nil {
		return nil, wire.FromLLM(err)
	}
	return FromChat(cr)
}

// DecodeRequest is Client.DecodeRequest with the request's parameters checked
// (CheckChatParams): billable names the billable parameters the operator allows.
func DecodeRequest(body []byte, billable []string) (*wire.Request, error) {
	cr, err := llm.ParseChatRequest(body)
	if err != nil {
		return nil, wire.FromLLM(err)
	}
	if e := CheckParams(cr.Extra, billable); e != nil {
		return nil, e
	}
	return FromChat(cr)
}

// FromChat is a Chat request already read (a client's, validated, or a job's stored
// request) in canonical form.
func FromChat(cr *llm.ChatRequest) (*wire.Request, error) {
	r := &wire.Request{Model: cr.Model, Stream: cr.Stream, Search: cr.Search, Params: map[string]json.RawMessage{}}
	var sys []string
	for i, raw := range cr.Messages {
		var m chatMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, wire.Invalid(fmt.Sprintf("messages[%d]", i), "messages[%d] is not a valid message object", i)
		}
		param := fmt.Sprintf("messages[%d]", i)
		parts, err := chatParts(param+".content", m.Content)
		if err != nil {
			return nil, err
		}
		switch m.Role {
		case "system", "developer":
			if len(r.Messages) == 0 {
				for _, p := range parts {
					sys = append(sys, p.Text)
				}
				continue
			}
			r.Messages = append(r.Messages, wire.Message{Role: wire.RoleSystem, Parts: parts})
		case "user":
			r.Messages = append(r.Messages, wire.Message{Role: wire.RoleUser, Parts: parts})
		case "assistant":
			for _, tc := range m.ToolCalls {
				parts = append(parts, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
			}
			parts = reasoningParts(m.Reasoning, m.ReasoningContent, parts)
			r.Messages = append(r.Messages, wire.Message{Role: wire.RoleAssistant, Parts: parts})
		case "tool", "function":
			id := cmp.Or(m.ToolCallID, m.Name)
			r.Messages = append(r.Messages, wire.Message{Role: wire.RoleTool, Parts: []wire.Part{{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: id, Parts: parts}}}})
		}
	}
	r.System = strings.Join(sys, "\n\n")
	for i, raw := range cr.Tools {
		t, err := wire.ChatTool(raw)
		if err != nil {
			return nil, wire.Invalid(fmt.Sprintf("tools[%d]", i), "tools[%d] is not a valid function tool", i)
		}
		r.Tools = append(r.Tools, t)
	}
	for k, v := range cr.Extra {
		var err error
		switch k {
		case "max_tokens", "max_completion_tokens":
			err = json.Unmarshal(v, &r.MaxTokens)
			if k == "max_completion_tokens" {
				r.Params[k] = v // a Chat model gets the limit under the name the client used
			}
		case "temperature":
			err = json.Unmarshal(v, &r.Temperature)
		case "top_p":
			err = json.Unmarshal(v, &r.TopP)
		case "parallel_tool_calls":
			err = json.Unmarshal(v, &r.ParallelToolCalls)
		case "response_format":
			r.ResponseFormat = v
		case "stop":
			var one string
			if json.Unmarshal(v, &one) == nil {
				r.Stop = []string{one}
			} else if !wire.IsNull(v) {
				err = json.Unmarshal(v, &r.Stop)
			}
		case "tool_choice":
			r.ToolChoice, err = chatToolChoice(v)
		case "reasoning_effort":
			if r.Reasoning == nil {
				r.Reasoning = &wire.ReasoningConfig{}
			}
			err = json.Unmarshal(v, &r.Reasoning.Effort)
		case llm.ReasoningKey:
			var c wire.ReasoningConfig
			if err = json.Unmarshal(v, &c); err == nil {
				if r.Reasoning != nil && r.Reasoning.Effort != "" {
					c.Effort = r.Reasoning.Effort // the request's own reasoning_effort wins
				}
				r.Reasoning = &c
			}
		default:
			r.Params[k] = v
		}
		if err != nil {
			return nil, wire.Invalid(k, "'%s' has the wrong type", k)
		}
	}
	return r, nil
}

func chatToolChoice(v json.RawMessage) (*wire.ToolChoice, error) {
	var mode string
	if json.Unmarshal(v, &mode) == nil {
		return &wire.ToolChoice{Mode: mode}, nil
	}
	var o struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(v, &o); err != nil || o.Function.Name == "" {
		return nil, fmt.Errorf("bad tool_choice")
	}
	return &wire.ToolChoice{Mode: "tool", Name: o.Function.Name}, nil
}

// chatParts reads a Chat message content: a string or text / image_url / file parts.
func chatParts(param string, raw json.RawMessage) ([]wire.Part, error) {
	if wire.IsNull(raw) {
		return nil, nil
	}
	// Only a string decodes as one (null is told above), so anything else goes
	// straight to the parts.
	if v := bytes.TrimLeft(raw, " \t\r\n"); len(v) > 0 && v[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []wire.Part{{Kind: wire.PartText, Text: s}}, nil
		}
	}
	var items []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
		File struct {
			Filename string `json:"filename"`
			FileData string `json:"file_data"`
			FileID   string `json:"file_id"`
		} `json:"file"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, wire.Invalid(param, "'%s' must be a string or an array of content parts", param)
	}
	var parts []wire.Part
	for i, it := range items {
		switch it.Type {
		case "text", "input_text", "output_text":
			parts = append(parts, wire.Part{Kind: wire.PartText, Text: it.Text})
		case "image_url":
			parts = append(parts, wire.Part{Kind: wire.PartImage, Image: &wire.Image{URL: it.ImageURL.URL}})
		case "file":
			p, err := wire.DecodeFile(fmt.Sprintf("%s[%d].file", param, i), it.File.Filename, it.File.FileData, "", it.File.FileID)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "refusal":
		default:
			return nil, wire.Invalid(fmt.Sprintf("%s[%d].type", param, i), "content part type %q is not supported", it.Type)
		}
	}
	return parts, nil
}

// EncodeRequest renders r as a Chat request body for model, with every protocol's
// reasoning state under llm.ReasoningKey (a model gets ChatModel's encoding instead).
func (chatCodec) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	out, err := chatRequest(r, model, false)
	if err != nil {
		return nil, err
	}
	reasoningConfig(out, r.Reasoning)
	return json.Marshal(out)
}

// chatRequest renders r as a Chat request's fields: for a model (toModel), the
// assistant messages carry only a Chat model's own reasoning_content; otherwise every
// protocol's reasoning rides along (wire.ChatReasoningValues).
func chatRequest(r *wire.Request, model string, toModel bool) (wire.TopLevel, error) {
	msgs, err := chatMessages(r, toModel)
	if err != nil {
		return nil, err
	}
	// The client's fields go in first; the model and messages only where the client
	// named neither.
	out := make(wire.TopLevel, len(r.Params))
	for k, v := range r.Params {
		out.Set(k, v)
	}
	out.SetNew("model", model)
	out.SetNew("messages", msgs)
	if len(r.Tools) > 0 {
		tools := make([]any, 0, len(r.Tools))
		for _, t := range r.Tools {
			fn := t.Decl("parameters")
			if t.Strict != nil {
				fn["strict"] = *t.Strict
			}
			tools = append(tools, map[string]any{"type": "function", "function": fn})
		}
		out.Set("tools", tools)
		out.SetToolChoice(r, func(name string) any {
			return map[string]any{"type": "function", "function": map[string]string{"name": name}}
		})
	}
	if r.MaxTokens > 0 {
		out.Set("max_tokens", r.MaxTokens)
	}
	out.SetSampling(r)
	if len(r.Stop) > 0 {
		out.Set("stop", r.Stop)
	}
	if !wire.IsNull(r.ResponseFormat) {
		out.Set("response_format", r.ResponseFormat)
	}
	return out, nil
}

// chatOutMessage is a system, user or assistant message of a Chat request the fleet
// sends (fields in name order, as encoding/json orders a map's keys).
type chatOutMessage struct {
	// Content is a string, nil (an assistant message that only calls tools) or
	// chatContent's parts.
	Content any `json:"content"`
	// ReasoningContent is set (possibly to "") when the message carries reasoning
	// text: a Chat model's own, or the readable text of another protocol's.
	ReasoningContent *string              `json:"reasoning_content,omitempty"`
	Role             string               `json:"role"`
	Reasoning        []wire.ChatReasoning `json:"searchfleet_reasoning,omitempty"`
	ToolCalls        []llm.ToolCall       `json:"tool_calls,omitempty"`
}

// chatMessages are r's messages as a Chat request's: *chatOutMessage values and tool
// messages (a tool result, its tool_call_id always there, empty or not).
func chatMessages(r *wire.Request, toModel bool) ([]any, error) {
	out := make([]any, 0, len(r.Messages)+1)
	if r.System != "" {
		out = append(out, &chatOutMessage{Role: "system", Content: r.System})
	}
	for i, m := range r.Messages {
		var texts, rest []wire.Part
		var calls []llm.ToolCall
		for _, p := range m.Parts {
			switch p.Kind {
			case wire.PartToolResult:
				// Chat wants tool results as their own messages, right after the call.
				out = append(out, map[string]string{"role": "tool", "tool_call_id": p.Result.CallID, "content": wire.ResultText(p.Result)})
			case wire.PartToolCall:
				calls = append(calls, p.Call.Chat())
			case wire.PartServerCall, wire.PartServerResult:
				// Searches of earlier turns are history the model reads as text.
				texts = append(texts, wire.Part{Kind: wire.PartText, Text: wire.RenderServerPart(p)})
			case wire.PartText:
				texts = append(texts, p)
			case wire.PartImage, wire.PartFile:
				rest = append(rest, p)
			}
		}
		switch m.Role {
		case wire.RoleTool:
			continue
		case wire.RoleAssistant:
			msg := &chatOutMessage{Role: "assistant"}
			if text := wire.JoinText(texts); text != "" || len(calls) == 0 {
				msg.Content = text
			}
			if len(calls) > 0 {
				msg.ToolCalls = calls
			}
			if toModel {
				msg.ReasoningContent = chatOwnReasoning(m.Parts)
			} else {
				msg.ReasoningContent, msg.Reasoning = wire.ChatReasoningValues(m.Parts)
			}
			out = append(out, msg)
		case wire.RoleSystem, wire.RoleUser:
			parts := append(texts, rest...)
			if len(parts) == 0 {
				continue // a user turn made only of tool results
			}
			out = append(out, &chatOutMessage{Role: string(m.Role), Content: chatContent(parts)})
		default:
			return nil, fmt.Errorf("message %d has role %q", i, m.Role)
		}
	}
	if len(out) == 0 {
		return nil, nil // "messages":null
	}
	return out, nil
}

// chatContent renders parts as a Chat content: a string when it is text only, else
// text, image_url and file parts, each with only its own field.
func chatContent(parts []wire.Part) any {
	if wire.TextOnly(parts) {
		return wire.TextLines(parts)
	}
	items := make([]map[string]any, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case wire.PartText:
			items = append(items, map[string]any{"type": "text", "text": p.Text})
		case wire.PartImage:
			items = append(items, map[string]any{"type": "image_url", "image_url": map[string]string{"url": p.Image.URLOrData()}})
		case wire.PartFile:
			items = append(items, map[string]any{"type": "file", "file": map[string]string{"filename": p.File.Name(), "file_data": p.File.DataURL()}})
		}
	}
	return items
}
