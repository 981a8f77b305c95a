package anthropic

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Model is the Anthropic Messages protocol as the fleet speaks it to a main
// model: POST {base}/v1/messages with x-api-key and anthropic-version.
var Model anthropicModel

type anthropicModel struct{}

// Version is the anthropic-version header the fleet sends.
const Version = "2023-06-01"

// anthropicSearchTool is the web search tool type sent unless the request names
// another (llm.SearchOptions.Tool).
const anthropicSearchTool = "web_search_20250305"

// anthropicChoices are the tool_choice types of the canonical modes ("auto" for any
// other).
var anthropicChoices = map[string]string{"none": "none", "required": "any", "tool": "tool"}

// anthropicDefaultMaxTokens is max_tokens when the request names none: Anthropic
// requires the field.
const anthropicDefaultMaxTokens = 4096

func (anthropicModel) Protocol() wire.Protocol { return wire.AnthropicMessages }

// NativeSearch: Anthropic web search is $10 per 1,000 searches (docs.anthropic.com,
// web search tool pricing).
func (anthropicModel) NativeSearch(string) (string, float64, bool) {
	return string(wire.AnthropicMessages), 0.01, true
}

func (anthropicModel) TakesFile(media string) bool    { return media == wire.MediaPDF }
func (anthropicModel) TakesFileURL(media string) bool { return media == wire.MediaPDF }

func (anthropicModel) Path(string, bool) string { return "/v1/messages" }

func (anthropicModel) Authorize(h http.Header, key string) {
	if key != "" {
		h.Set("x-api-key", key)
	}
	h.Set("anthropic-version", Version)
}

// EncodeRequest renders r as a Messages request: system apart, tool results as
// tool_result blocks of user turns, tool calls as tool_use blocks, client tools as
// {name, description, input_schema}, consecutive turns of one role merged.
func (anthropicModel) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	r, err := wire.ModelFiles(r, Model, model)
	if err != nil {
		return nil, err
	}
	out := wire.TopLevel{}
	out.Set("model", model)
	out.Set("max_tokens", anthropicDefaultMaxTokens)
	if r.MaxTokens > 0 {
		out.Set("max_tokens", r.MaxTokens)
	}
	if r.System != "" {
		out.Set("system", r.System)
	}
	type turn struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	var msgs []turn
	for _, m := range r.Messages {
		role := "user"
		if m.Role == wire.RoleAssistant {
			role = "assistant"
		}
		var blocks []any
		parts := m.Parts
		if m.Role == wire.RoleAssistant {
			parts = thinkingFirst(parts)
		}
		for _, p := range parts {
			switch p.Kind {
			case wire.PartReasoning:
				// The model's own thinking goes back verbatim; another protocol's
				// reasoning cannot (it has no signature Anthropic accepts).
				if b := thinkingBlock(p); b != nil {
					blocks = append(blocks, b)
				}
			case wire.PartText:
				if p.Text != "" {
					blocks = append(blocks, map[string]string{"type": "text", "text": p.Text})
				}
			case wire.PartImage: // a URL source, or base64 (data: URLs split)
				source := map[string]string{"type": "url", "url": p.Image.URL}
				if media, data, ok := p.Image.Inline(); ok {
					source = map[string]string{"type": "base64", "media_type": media, "data": data}
				}
				blocks = append(blocks, map[string]any{"type": "image", "source": source})
			case wire.PartFile:
				source := map[string]string{"type": "base64", "media_type": p.File.MediaType, "data": p.File.Data}
				if p.File.Data == "" && p.File.URL != "" { // a PDF it takes by URL (URLPDFSourceParam)
					source = map[string]string{"type": "url", "url": p.File.URL}
				}
				blocks = append(blocks, map[string]any{"type": "document", "title": p.File.Name(), "source": source})
			case wire.PartToolCall:
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": p.Call.ID, "name": p.Call.Name, "input": wire.ToolArgs(p.Call.Arguments)})
			case wire.PartToolResult:
				b := map[string]any{"type": "tool_result", "tool_use_id": p.Result.CallID, "content": wire.ResultText(p.Result)}
				if p.Result.IsError {
					b["is_error"] = true
				}
				blocks = append(blocks, b)
			case wire.PartServerCall, wire.PartServerResult:
				blocks = append(blocks, map[string]string{"type": "text", "text": wire.RenderServerPart(p)})
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			continue
		}
		msgs = append(msgs, turn{Role: role, Content: blocks})
	}
	if len(msgs) == 0 {
		return nil, wire.Invalid("messages", "the conversation has no content for the model")
	}
	out.Set("messages", msgs)
	var tools []any
	if o := r.Search; o != nil {
		// The provider's own search: its server tool, with the request's settings.
		st := map[string]any{"type": anthropicSearchTool, "name": "web_search"}
		if o.Tool != "" && o.Tool != anthropicSearchTool {
			// Later versions (dynamic filtering) are refused by models without
			// programmatic tool calling unless only direct calls are allowed.
			st["type"], st["allowed_callers"] = o.Tool, []string{"direct"}
		}
		if o.MaxUses > 0 {
			st["max_uses"] = o.MaxUses
		}
		if len(o.AllowedDomains) > 0 {
			st["allowed_domains"] = o.AllowedDomains
		} else if len(o.BlockedDomains) > 0 {
			st["blocked_domains"] = o.BlockedDomains
		}
		if o.Country != "" {
			st["user_location"] = map[string]string{"type": "approximate", "country": strings.ToUpper(o.Country)}
		}
		tools = append(tools, st)
		out.Set("tools", tools)
	}
	if len(r.Tools) > 0 {
		for _, t := range r.Tools {
			tool := t.Decl("input_schema")
			if wire.IsNull(t.Parameters) {
				tool["input_schema"] = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			tools = append(tools, tool)
		}
		out.Set("tools", tools)
		serial := r.ParallelToolCalls != nil && !*r.ParallelToolCalls
		if tc := r.ToolChoice; tc != nil || serial {
			choice := map[string]any{"type": "auto"}
			if tc != nil && anthropicChoices[tc.Mode] != "" {
				choice["type"] = anthropicChoices[tc.Mode]
			}
			if tc != nil && tc.Mode == "tool" {
				choice["name"] = tc.Name
			}
			if serial && choice["type"] != "none" {
				choice["disable_parallel_tool_use"] = true
			}
			out.Set("tool_choice", choice)
		}
	}
	out.SetSampling(r)
	if len(r.Stop) > 0 {
		out.Set("stop_sequences", r.Stop)
	}
	if r.Stream {
		out.Set("stream", true)
	}
	anthropicThinkingConfig(out, r.Reasoning)
	return json.Marshal(out)
}

// anthropicThinkingConfig sets a request's thinking from its reasoning settings:
// adaptive, disabled, or enabled with the budget (an effort's, BudgetOf); max_tokens
// is raised above the budget where it is not (Anthropic requires it).
func anthropicThinkingConfig(out wire.TopLevel, c *wire.ReasoningConfig) {
	switch {
	case c == nil:
	case c.Adaptive:
		out.Set("thinking", map[string]any{"type": "adaptive"})
	case c.Disabled:
		out.Set("thinking", map[string]any{"type": "disabled"})
	case c.BudgetOf() > 0:
		budget := max(c.BudgetOf(), 1024)
		out.Set("thinking", map[string]any{"type": "enabled", "budget_tokens": budget})
		if mt, _ := out["max_tokens"].(int); mt <= budget {
			out.Set("max_tokens", budget+anthropicDefaultMaxTokens)
		}
	}
}

// thinkingFirst moves the text an assistant message has before its first thinking
// block to after that run of thinking blocks: Anthropic wants an assistant message
// that made tool calls to start with its thinking, and a streamed answer (text sent
// as it came, its thinking at the end) may come back in that order.
func thinkingFirst(parts []wire.Part) []wire.Part {
	first := -1
	for i, p := range parts {
		if _, ok := wire.ReasoningFor(p, wire.AnthropicMessages); ok {
			first = i
			break
		}
		if p.Kind != wire.PartText {
			return parts
		}
	}
	if first <= 0 {
		return parts
	}
	end := first
	for end < len(parts) {
		if _, ok := wire.ReasoningFor(parts[end], wire.AnthropicMessages); !ok {
			break
		}
		end++
	}
	out := append([]wire.Part(nil), parts[first:end]...)
	out = append(out, parts[:first]...)
	return append(out, parts[end:]...)
}

// anthropicAnswer is a Messages response as the model codec reads it.
type anthropicAnswer struct {
	ID         string               `json:"id"`
	Type       string               `json:"type"`
	Model      string               `json:"model"`
	Content    []anthropicBlock     `json:"content"`
	StopReason string               `json:"stop_reason"`
	Usage      anthropicAnswerUsage `json:"usage"`
	Error      *anthropicErrorBody  `json:"error"`
}

type anthropicAnswerUsage struct {
	InputTokens   int `json:"input_tokens"`
	OutputTokens  int `json:"output_tokens"`
	ServerToolUse *struct {
		WebSearchRequests int `json:"web_search_requests"`
	} `json:"server_tool_use"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

var anthropicStopReasons = map[string]wire.StopReason{"end_turn": wire.StopEndTurn, "stop_sequence": wire.StopEndTurn, "pause_turn": wire.StopEndTurn,
	"tool_use": wire.StopToolUse, "max_tokens": wire.StopMaxTokens, "model_context_window_exceeded": wire.StopMaxTokens, "refusal": wire.StopRefusal}

// DecodeResponse reads a Messages response: text blocks (with their citations),
// tool_use blocks as tool calls, the provider's own searches (server_tool_use,
// web_search_tool_result), thinking and redacted_thinking blocks (verbatim, for the
// next turn), usage and the stop reason.
func (anthropicModel) DecodeResponse(body []byte) (*wire.Response, error) {
	var a anthropicAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("not a Messages API response: %s", wire.Clip(err.Error(), 200))
	}
	if a.Type == "error" && a.Error != nil {
		return nil, wire.StatusError(anthropicStatus(a.Error.Type), a.Error.Type, a.Error.Message)
	}
	if a.Type != "message" {
		return nil, fmt.Errorf("not a Messages API response: type %q", a.Type)
	}
	return a.response(), nil
}

func (a *anthropicAnswer) response() *wire.Response {
	r := &wire.Response{ID: a.ID, Model: a.Model, Status: wire.StatusCompleted, Paused: a.StopReason == "pause_turn",
		Stop: cmp.Or(anthropicStopReasons[a.StopReason], wire.StopEndTurn), Usage: wire.Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	if st := a.Usage.ServerToolUse; st != nil {
		r.Usage.WebSearches = st.WebSearchRequests
	}
	for _, b := range a.Content {
		switch b.Type {
		case "text":
			p := wire.Part{Kind: wire.PartText, Text: b.Text}
			for _, c := range b.Citations {
				p.Citations = append(p.Citations, wire.Citation{URL: c.URL, Title: c.Title, CitedText: c.CitedText, Start: -1, End: -1})
			}
			r.Content = append(r.Content, p)
		case "tool_use":
			r.Content = append(r.Content, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: b.ID, Name: b.Name, Arguments: wire.CompactArgs(b.Input)}})
		case "thinking", "redacted_thinking":
			r.Content = append(r.Content, wire.Part{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: b.Thinking, Signature: b.Signature, Redacted: b.Data}})
		case "server_tool_use":
			var in struct {
				Query string `json:"query"`
			}
			json.Unmarshal(b.Input, &in)
			r.Content = append(r.Content, wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: b.ID, Name: b.Name, Query: in.Query}})
		case "web_search_tool_result":
			r.Content = append(r.Content, wire.Part{Kind: wire.PartServerResult, Search: anthropicSearchResult(b.ToolUseID, b.Content)})
		}
	}
	return r
}

// Continue resumes a pause_turn answer: the request's messages with the paused
// assistant content appended exactly as it came (its encrypted fields included), to
// the assistant turn an earlier continuation sent.
func (anthropicModel) Continue(request, answer []byte) ([]byte, bool) {
	var a struct {
		StopReason string          `json:"stop_reason"`
		Content    json.RawMessage `json:"content"`
	}
	if json.Unmarshal(answer, &a) != nil || a.StopReason != "pause_turn" || wire.IsNull(a.Content) {
		return nil, false
	}
	var req map[string]json.RawMessage
	var msgs []json.RawMessage
	if json.Unmarshal(request, &req) != nil || json.Unmarshal(req["messages"], &msgs) != nil {
		return nil, false
	}
	// A second pause extends the assistant turn of the first: one turn with everything
	// the assistant said so far, as the recorded continuations have it.
	content := a.Content
	if n := len(msgs); n > 0 {
		var last struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		}
		var more []json.RawMessage
		if json.Unmarshal(msgs[n-1], &last) == nil && last.Role == "assistant" && json.Unmarshal(a.Content, &more) == nil {
			content, _ = json.Marshal(append(last.Content, more...))
			msgs = msgs[:n-1]
		}
	}
	turn, _ := json.Marshal(map[string]json.RawMessage{"role": json.RawMessage(`"assistant"`), "content": content})
	req["messages"], _ = json.Marshal(append(msgs, turn))
	next, err := json.Marshal(req)
	return next, err == nil
}

// anthropicStatuses are the HTTP statuses of Anthropic's error types (for errors that
// arrive in a stream, without a status of their own).
var anthropicStatuses = map[string]int{"overloaded_error": 529, "rate_limit_error": http.StatusTooManyRequests,
	"api_error": http.StatusInternalServerError, "timeout_error": http.StatusGatewayTimeout, "authentication_error": http.StatusUnauthorized,
	"permission_error": http.StatusForbidden, "billing_error": http.StatusPaymentRequired, "not_found_error": http.StatusNotFound,
	"request_too_large": http.StatusRequestEntityTooLarge}

// anthropicStatus is the HTTP status of an Anthropic error type (400 for any other).
func anthropicStatus(typ string) int { return cmp.Or(anthropicStatuses[typ], http.StatusBadRequest) }

// DecodeError reads {"type":"error","error":{"type":…,"message":…}}.
func (anthropicModel) DecodeError(status int, body []byte) *llm.Error {
	return wire.ErrorEnvelope(status, body)
}

func (anthropicModel) NewStreamDecoder() wire.StreamDecoder {
	return &anthropicDecoder{args: map[int]*strings.Builder{}}
}

// anthropicDecoder assembles a Messages stream: message_start, content blocks built
// from their start and deltas (text_delta, input_json_delta, citations_delta),
// message_delta's stop reason and usage, message_stop.
type anthropicDecoder struct {
	msg     anthropicAnswer
	started bool
	done    bool
	args    map[int]*strings.Builder
}

func (d *anthropicDecoder) Event(name string, data []byte) (string, error) {
	var ev struct {
		Type         string           `json:"type"`
		Message      *anthropicAnswer `json:"message"`
		Index        int              `json:"index"`
		ContentBlock *anthropicBlock  `json:"content_block"`
		Delta        *struct {
			Type        string          `json:"type"`
			Text        string          `json:"text"`
			PartialJSON string          `json:"partial_json"`
			Thinking    string          `json:"thinking"`
			Signature   string          `json:"signature"`
			Citation    json.RawMessage `json:"citation"`
			StopReason  string          `json:"stop_reason"`
		} `json:"delta"`
		Usage *anthropicAnswerUsage `json:"usage"`
		Error *anthropicErrorBody   `json:"error"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return "", fmt.Errorf("unreadable Messages stream event: %s", wire.Clip(err.Error(), 200))
	}
	block := func() *anthropicBlock {
		if ev.Index < 0 || ev.Index >= len(d.msg.Content) {
			return nil
		}
		return &d.msg.Content[ev.Index]
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			d.msg, d.started = *ev.Message, true
			d.msg.Content = nil
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			break
		}
		for len(d.msg.Content) <= ev.Index {
			d.msg.Content = append(d.msg.Content, anthropicBlock{})
		}
		d.msg.Content[ev.Index] = *ev.ContentBlock
		if t := ev.ContentBlock.Type; t == "tool_use" || t == "server_tool_use" {
			d.args[ev.Index] = &strings.Builder{}
		}
		return ev.ContentBlock.Text, nil
	case "content_block_delta":
		b := block()
		if b == nil || ev.Delta == nil {
			break
		}
		switch ev.Delta.Type {
		case "text_delta":
			b.Text += ev.Delta.Text
			return ev.Delta.Text, nil
		case "thinking_delta":
			b.Thinking += ev.Delta.Thinking
		case "signature_delta":
			b.Signature += ev.Delta.Signature
		case "input_json_delta":
			if sb := d.args[ev.Index]; sb != nil {
				sb.WriteString(ev.Delta.PartialJSON)
			}
		case "citations_delta":
			var c anthropicCitation
			if json.Unmarshal(ev.Delta.Citation, &c) == nil {
				b.Citations = append(b.Citations, c)
			}
		}
	case "content_block_stop":
		if b, sb := block(), d.args[ev.Index]; b != nil && sb != nil && sb.Len() > 0 {
			b.Input = json.RawMessage(sb.String())
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			d.msg.StopReason = ev.Delta.StopReason
		}
		if u := ev.Usage; u != nil {
			if u.InputTokens > 0 {
				d.msg.Usage.InputTokens = u.InputTokens
			}
			d.msg.Usage.OutputTokens = u.OutputTokens
			if u.ServerToolUse != nil {
				d.msg.Usage.ServerToolUse = u.ServerToolUse
			}
		}
	case "message_stop":
		d.done = true
	case "error":
		if ev.Error != nil {
			return "", wire.StatusError(anthropicStatus(ev.Error.Type), ev.Error.Type, ev.Error.Message)
		}
		return "", wire.StatusError(http.StatusBadGateway, "", "the model's stream reported an error")
	}
	return "", nil
}

func (d *anthropicDecoder) Response() (*wire.Response, error) {
	if !d.started || !d.done {
		return nil, wire.StatusError(http.StatusBadGateway, "", "the model's stream ended before message_stop")
	}
	return d.msg.response(), nil
}
