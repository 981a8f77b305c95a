package simulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The simulator's reasoning models are as strict as the providers' about their
// reasoning state: they emit it (signed, so an altered copy is recognised) and
// refuse, with the provider's status and message, a follow-up that drops or alters it.
//
//   - Anthropic Messages with thinking enabled (or adaptive): the answer starts with a
//     thinking block whose signature signs its text; a request whose thinking or
//     redacted_thinking block does not carry the signature the simulator gave it is
//     refused ("messages.N.content.M: Invalid `signature` in `thinking` block"), and
//     so is one whose last assistant message with tool_use does not start with a
//     thinking block ("messages.N.content.0.type: Expected `thinking` or
//     `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, …"). The
//     messages are those Anthropic returns (recorded in public issue threads; the
//     fixtures hold only the thinking blocks' shape).

// simKey signs the simulator's reasoning state.
var simKey = []byte("searchfleet-simulator-reasoning")

// sign returns the simulator's signature of a reasoning text.
func sign(kind, text string) string {
	m := hmac.New(sha256.New, simKey)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write([]byte(text))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// thinkingText is what a simulated reasoning model thinks before answering user.
func thinkingText(user, id string) string {
	return fmt.Sprintf("The user asks: %q. I should decide whether a web search helps before answering (%s).", clipText(user, 80), id)
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// anthropicThinkingOn reports whether a Messages request enables thinking.
func anthropicThinkingOn(body []byte) bool {
	var req struct {
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
	}
	json.Unmarshal(body, &req)
	return req.Thinking != nil && (req.Thinking.Type == "enabled" || req.Thinking.Type == "adaptive")
}

// anthropicThinkingError checks a thinking request's messages as Anthropic does: every
// thinking and redacted_thinking block unaltered, and the last assistant message that
// made tool calls opening with one. "" when they pass.
// carried counts the thinking blocks the messages carry.
func anthropicThinkingError(body []byte) (msg string, carried int) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return "", 0
	}
	last := -1
	var lastBlocks []map[string]any
	for i, m := range req.Messages {
		var blocks []map[string]any
		if m.Role != "assistant" || json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		uses := false
		for j, b := range blocks {
			switch b["type"] {
			case "thinking":
				carried++
				text, _ := b["thinking"].(string)
				sig, _ := b["signature"].(string)
				if sig != sign("thinking", text) {
					return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j), carried
				}
			case "redacted_thinking":
				carried++
				data, _ := b["data"].(string)
				if len(data) < 8 || data[8:] != sign("redacted", data[:8]) {
					return fmt.Sprintf("messages.%d.content.%d: Invalid `data` in `redacted_thinking` block", i, j), carried
				}
			case "tool_use":
				uses = true
			}
		}
		if uses {
			last, lastBlocks = i, blocks
		}
	}
	if last >= 0 {
		if t := lastBlocks[0]["type"]; t != "thinking" && t != "redacted_thinking" {
			return fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%v`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", last, t), carried
		}
	}
	return "", carried
}

// anthropicThinking checks a thinking request and, when it passes, returns the
// thinking part its answer opens with; ok is false when the request was refused (the
// error is written). Stats count model_reasoning_verified (a request that carried
// reasoning state and passed) and model_reasoning_refused.
func (s *Server) anthropicThinking(w http.ResponseWriter, body []byte, user, id string) (part *wire.Part, ok bool) {
	if !anthropicThinkingOn(body) {
		return nil, true
	}
	msg, carried := anthropicThinkingError(body)
	if msg != "" {
		s.stats.count("model_reasoning_refused", nil, id)
		writeError(w, http.StatusBadRequest, wire.Anthropic.EncodeError(&wire.Error{Status: http.StatusBadRequest, Message: msg}))
		return nil, false
	}
	if carried > 0 {
		s.stats.count("model_reasoning_verified", nil, id)
	}
	text := thinkingText(user, id)
	return &wire.Part{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: text, Signature: sign("thinking", text)}}, true
}

// withReasoning puts a reasoning part first in an answer (nil: none).
func withReasoning(r *wire.Response, p *wire.Part) *wire.Response {
	if p != nil {
		r.Content = append([]wire.Part{*p}, r.Content...)
	}
	return r
}
