package simulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
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
func anthropicThinkingError(body []byte) (refusal *wire.Error, carried int) {
	last := -1
	var lastBlocks []map[string]any
	for i, m := range bodyMessages(body) {
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
					return refuse("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j), carried
				}
			case "redacted_thinking":
				carried++
				data, _ := b["data"].(string)
				if len(data) < 8 || data[8:] != sign("redacted", data[:8]) {
					return refuse("messages.%d.content.%d: Invalid `data` in `redacted_thinking` block", i, j), carried
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
			return refuse("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%v`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", last, t), carried
		}
	}
	return nil, carried
}

// anthropicThinking checks a thinking request and, when it passes, returns the
// thinking part its answer opens with; ok is false when the request was refused (the
// error is written). Stats count model_reasoning_verified (a request that carried
// reasoning state and passed) and model_reasoning_refused.
func (s *Server) anthropicThinking(w http.ResponseWriter, body []byte, user, id string) (part *wire.Part, ok bool) {
	if !anthropicThinkingOn(body) {
		return nil, true
	}
	if !s.reasoningPasses(w, id, body, anthropicThinkingError, anthropic.Client.EncodeError) {
		return nil, false
	}
	text := thinkingText(user, id)
	return &wire.Part{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: text, Signature: sign("thinking", text)}}, true
}

//   - OpenAI Responses with reasoning.effort set (not "none"), or a reasoning model
//     (wire.ReasonsUnasked: o-series, gpt-5, codex) asked nothing, which thinks at its
//     default effort: the answer's function calls follow a reasoning item (rs_…, a
//     summary, and encrypted_content when the request included
//     "reasoning.encrypted_content"), and their call ids say so (call_rs_…). A
//     follow-up that sends such a call without its reasoning item is refused ("Item
//     'fc_…' of type 'function_call' was provided without its required 'reasoning'
//     item: 'rs_…'.", param input), one whose encrypted_content is not the
//     simulator's ("The encrypted content for item rs_… could not be verified.
//     Reason: Encrypted content could not be decrypted or parsed.", code
//     invalid_encrypted_content), and, with store false, one that sends a reasoning
//     item by its id alone (404 "Item with id 'rs_…' not found. Items are not
//     persisted when `store` is set to false. …", param input): nothing was kept to
//     find it by. OpenAI keys the first check on the function_call item's id; the
//     simulator, which gets no item ids back, keys it on the call id. The messages
//     are OpenAI's (public issue threads; the fixtures hold only the reasoning
//     item's shape).

// responsesReasoningOn reports whether a Responses request's model reasons (asked
// to, or a reasoning model asked nothing), and whether it included the encrypted
// content.
func responsesReasoningOn(body []byte) (on, encrypted bool) {
	var req struct {
		Model     string `json:"model"`
		Reasoning struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
		Include []string `json:"include"`
	}
	json.Unmarshal(body, &req)
	effort := req.Reasoning.Effort
	on = effort != "" && effort != "none" || effort == "" && wire.ReasonsUnasked(req.Model)
	return on, slices.Contains(req.Include, "reasoning.encrypted_content")
}

// reasoningID is the id of the reasoning item the simulator gives with call id.
func reasoningID(callID string) string { return "rs_" + sign("rs", callID)[:20] }

// responsesReasoningError checks a Responses request's input: every reasoning item the
// simulator issued carries its encrypted content, and every call the simulator made
// after reasoning comes after its reasoning item. It returns the refusal (nil: none)
// and the reasoning items the input carried.
func responsesReasoningError(body []byte) (refusal *wire.Error, carried int) {
	var req struct {
		Input json.RawMessage `json:"input"`
		Store *bool           `json:"store"`
	}
	var items []struct {
		Type      string  `json:"type"`
		ID        string  `json:"id"`
		CallID    string  `json:"call_id"`
		Encrypted *string `json:"encrypted_content"`
	}
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req.Input, &items) != nil {
		return nil, 0
	}
	stored := req.Store == nil || *req.Store
	seen := map[string]bool{}
	for _, it := range items {
		switch it.Type {
		case "reasoning":
			carried++
			switch {
			case it.Encrypted == nil && !stored:
				return &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "input",
					Message: fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", it.ID)}, carried
			case it.Encrypted == nil:
				// A stored response's item, by its id: the simulator keeps nothing, but
				// the ids it issued are its own.
				if !strings.HasPrefix(it.ID, "rs_") {
					return &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "input", Message: fmt.Sprintf("Item with id '%s' not found.", it.ID)}, carried
				}
			case *it.Encrypted != sign("encrypted", it.ID):
				return &wire.Error{Status: http.StatusBadRequest, Code: "invalid_encrypted_content",
					Message: fmt.Sprintf("The encrypted content for item %s could not be verified. Reason: Encrypted content could not be decrypted or parsed.", it.ID)}, carried
			}
			seen[it.ID] = true
		case "function_call":
			if rs := reasoningID(it.CallID); len(it.CallID) > 8 && it.CallID[:8] == "call_rs_" && !seen[rs] {
				return &wire.Error{Status: http.StatusBadRequest, Param: "input",
					Message: fmt.Sprintf("Item 'fc_%s' of type 'function_call' was provided without its required 'reasoning' item: '%s'.", it.CallID[5:], rs)}, carried
			}
		}
	}
	return nil, carried
}

// reasoningPasses checks the reasoning state of a reasoning request's body with check
// and counts the check under key: model_reasoning_refused when refused (answering the
// refusal as encode writes it) or model_reasoning_verified when it passed carrying
// reasoning state. It reports whether the request passed.
func (s *Server) reasoningPasses(w http.ResponseWriter, key string, body []byte, check func([]byte) (*wire.Error, int), encode func(*wire.Error) []byte) bool {
	refusal, carried := check(body)
	if refusal != nil {
		s.stats.count("model_reasoning_refused", nil, key)
		writeError(w, refusal.Status, encode(refusal))
		return false
	}
	if carried > 0 {
		s.stats.count("model_reasoning_verified", nil, key)
	}
	return true
}

// refuse is a 400 refusal of a reasoning request.
func refuse(format string, args ...any) *wire.Error {
	return &wire.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

// withReasoningItem adds a reasoning item before the first output item of an encoded
// Responses answer: the one its first call (call_rs_…) names, or a new one.
func withReasoningItem(answer []byte, body []byte, user, id string) []byte {
	_, encrypted := responsesReasoningOn(body)
	var resp map[string]any
	if json.Unmarshal(answer, &resp) != nil {
		return answer
	}
	out, _ := resp["output"].([]any)
	rs := "rs_sim_" + id
	for _, it := range out {
		if item := it.(map[string]any); item["type"] == "function_call" {
			rs = reasoningID(item["call_id"].(string))
			break
		}
	}
	item := map[string]any{"id": rs, "type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": thinkingText(user, id)}}}
	if encrypted {
		item["encrypted_content"] = sign("encrypted", rs)
	}
	resp["output"] = append([]any{item}, out...)
	return mustJSON(resp)
}

//   - Gemini with generationConfig.thinkingConfig: the first functionCall part of each
//     answer carries a thoughtSignature; a request whose current turn (the contents
//     after the last user text) has a model turn whose first functionCall part does
//     not carry the signature the simulator gave it (absent, altered, or Google's
//     "skip" sentinel) is refused with Gemini's 400 INVALID_ARGUMENT ("Function call
//     is missing a thought_signature in functionCall parts. …", from public issue
//     threads; Gemini's wording for an altered signature is not on record, so the
//     simulator says the same).

// geminiCallSignature is the simulator's thought signature of a function call.
func geminiCallSignature(name string, args json.RawMessage) string {
	var v any
	json.Unmarshal(args, &v)
	norm, _ := json.Marshal(v)
	return sign("gemini", name+"|"+string(norm))
}

// geminiThinking reports whether a generateContent request configures thinking and
// whether it asks for thought summaries (thinkingConfig.includeThoughts).
func geminiThinking(body []byte) (on, includeThoughts bool) {
	var req struct {
		GenerationConfig struct {
			ThinkingConfig json.RawMessage `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	var config struct {
		IncludeThoughts bool `json:"includeThoughts"`
	}
	json.Unmarshal(body, &req)
	json.Unmarshal(req.GenerationConfig.ThinkingConfig, &config)
	return len(req.GenerationConfig.ThinkingConfig) > 0, config.IncludeThoughts
}

// geminiSignatureError checks the current turn's function calls as Gemini 3 does;
// carried counts the signatures checked.
func geminiSignatureError(body []byte) (refusal *wire.Error, carried int) {
	var req geminiRequest
	if json.Unmarshal(body, &req) != nil {
		return nil, 0
	}
	start := 0
	for i, c := range req.Contents {
		for _, p := range c.Parts {
			if c.Role == "user" && p.Text != "" {
				start = i + 1
			}
		}
	}
	for i := start; i < len(req.Contents); i++ {
		c := req.Contents[i]
		if c.Role != "model" {
			continue
		}
		for _, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			if p.ThoughtSignature != geminiCallSignature(p.FunctionCall.Name, p.FunctionCall.Args) {
				return refuse("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", p.FunctionCall.Name, i+1), carried
			}
			carried++
			break // only the first call of a turn is signed
		}
	}
	return nil, carried
}

//   - OpenAI Chat with reasoning_effort (or thinking enabled, as Kimi and DeepSeek
//     take it), not streamed: the answer's assistant message carries
//     reasoning_content (signed at its end) and its tool call ids say so (call_rc_…);
//     a follow-up whose assistant message with such calls lacks that reasoning_content,
//     or alters it, is refused as Moonshot refuses it ("thinking is enabled but
//     reasoning_content is missing in assistant tool call message at index N", from a
//     public issue thread).

// chatReasoningOn reports whether a Chat request asks for reasoning.
func chatReasoningOn(req chatRequest) bool {
	return req.ReasoningEffort != "" && req.ReasoningEffort != "none" || req.Thinking != nil && req.Thinking.Type == "enabled"
}

// signedReasoning is reasoning_content with the simulator's signature at its end.
func signedReasoning(text string) string { return text + " #" + sign("chat", text) }

// chatReasoningError checks the assistant tool call messages of a reasoning request.
func chatReasoningError(body []byte) (refusal *wire.Error, carried int) {
	var req struct {
		Messages []struct {
			llm.Message
			ReasoningContent string `json:"reasoning_content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &req)
	for i, m := range req.Messages {
		if m.Role != "assistant" || len(m.ToolCalls) == 0 || !strings.HasPrefix(m.ToolCalls[0].ID, "call_rc_") {
			continue
		}
		rc := m.ReasoningContent
		text, _, _ := strings.Cut(rc, " #")
		if rc == "" || signedReasoning(text) != rc {
			return refuse("thinking is enabled but reasoning_content is missing in assistant tool call message at index %d", i), carried
		}
		carried++
	}
	return nil, carried
}

// withReasoningContent gives a scripted Chat answer its reasoning_content, and its
// tool calls ids that say so. The calls stay a []any of objects, the shape
// streamAnswer reads, so a streamed answer keeps them.
func withReasoningContent(msg map[string]any, user, id string) map[string]any {
	msg["reasoning_content"] = signedReasoning(thinkingText(user, id))
	if calls, ok := msg["tool_calls"]; ok {
		var tcs []any
		b, _ := json.Marshal(calls)
		json.Unmarshal(b, &tcs)
		for _, c := range tcs {
			tc, _ := c.(map[string]any)
			if s, _ := tc["id"].(string); s != "" {
				tc["id"] = "call_rc_" + strings.TrimPrefix(s, "call_")
			}
		}
		msg["tool_calls"] = tcs
	}
	return msg
}
