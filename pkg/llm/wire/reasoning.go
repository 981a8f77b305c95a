package wire

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Reasoning is a model's reasoning state, kept verbatim: what a reasoning model wants
// back, unaltered, on every later turn of a tool loop. Only a model of its Protocol
// can read it back; the others get nothing of it (its Text is the model's own
// thinking, not part of the conversation).
//
// Its JSON form (the tags) is the canonical one the fleet stores.
type Reasoning struct {
	// Protocol is whose state it is: AnthropicMessages (a thinking or
	// redacted_thinking block), OpenAIResponses (a reasoning item), Gemini (a thought
	// or the thoughtSignature of the functionCall part that follows it), OpenAIChat
	// (reasoning_content, DeepSeek and Kimi style).
	Protocol Protocol `json:"protocol"`
	// Text is the readable reasoning: Anthropic's thinking, Gemini's thought text, a
	// Chat model's reasoning_content, a Responses item's summary texts joined.
	Text string `json:"text,omitempty"`
	// Signature is an Anthropic thinking block's signature, or the thoughtSignature
	// Gemini put on the part that follows.
	Signature string `json:"signature,omitempty"`
	// Redacted is an Anthropic redacted_thinking block's data.
	Redacted string `json:"redacted,omitempty"`
	// ID, Summary and Encrypted are a Responses reasoning item's id, summary texts and
	// encrypted_content.
	ID        string   `json:"id,omitempty"`
	Summary   []string `json:"summary,omitempty"`
	Encrypted string   `json:"encrypted_content,omitempty"`
}

// ReasoningConfig is how much a model should think: an OpenAI effort, an Anthropic
// or Gemini token budget, or Anthropic's adaptive thinking. Each model codec carries
// what its protocol takes (EffortOf, BudgetOf map the others onto it).
type ReasoningConfig struct {
	// Effort is none, minimal, low, medium, high or xhigh.
	Effort string `json:"effort,omitempty"`
	// BudgetTokens is a thinking budget in tokens (Anthropic budget_tokens, Gemini
	// thinkingBudget).
	BudgetTokens int `json:"budget_tokens,omitempty"`
	// Adaptive is Anthropic's adaptive thinking: the model decides.
	Adaptive bool `json:"adaptive,omitempty"`
	// Disabled turns thinking off.
	Disabled bool `json:"disabled,omitempty"`
	// Summary is a Responses reasoning.summary (auto, concise, detailed).
	Summary string `json:"summary,omitempty"`
}

// Thinking budgets of the efforts, for a target that takes a budget (Anthropic's
// minimum budget_tokens is 1,024), and the efforts of budgets, for one that takes an
// effort: the fleet's own mapping, no provider publishes one.
var effortBudget = map[string]int{"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}

// BudgetOf returns the thinking budget of c: its own, else its effort's; 0 when it
// names neither (or thinking is off).
func (c *ReasoningConfig) BudgetOf() int {
	if c == nil || c.Disabled {
		return 0
	}
	if c.BudgetTokens > 0 {
		return c.BudgetTokens
	}
	return effortBudget[c.Effort]
}

// EffortOf returns the effort of c: its own, else its budget's; "" when it names
// neither (adaptive: the model's default).
func (c *ReasoningConfig) EffortOf() string {
	switch {
	case c == nil:
		return ""
	case c.Disabled:
		return "none"
	case c.Effort != "":
		return c.Effort
	case c.BudgetTokens <= 0:
		return ""
	case c.BudgetTokens <= effortBudget["low"]:
		return "low"
	case c.BudgetTokens <= effortBudget["medium"]:
		return "medium"
	}
	return "high"
}

// ReasoningFor returns the reasoning parts of protocol p among parts.
func ReasoningFor(p Part, protocol Protocol) (*Reasoning, bool) {
	if p.Kind != PartReasoning || p.Reasoning == nil || p.Reasoning.Protocol != protocol {
		return nil, false
	}
	return p.Reasoning, true
}

// A Chat assistant message carries another protocol's reasoning state, which Chat has
// no field for, under llm.ReasoningKey (a Chat client's answer, turns stored in the
// earlier Chat form): each entry the canonical Reasoning with the id of the tool call
// it came before ("" : before the text). A request's ReasoningConfig rides at the top
// level under the same key (ChatModel turns it into reasoning_effort for a Chat
// model).

// ChatReasoning is one entry of an assistant message's llm.ReasoningKey.
type ChatReasoning struct {
	Reasoning
	Before string `json:"before,omitempty"`
}

// chatReasoningOf lists the reasoning parts of parts with the tool call each precedes.
func chatReasoningOf(parts []Part) []ChatReasoning {
	var out []ChatReasoning
	var pending []Reasoning
	flush := func(before string) {
		for _, r := range pending {
			out = append(out, ChatReasoning{Reasoning: r, Before: before})
		}
		pending = nil
	}
	for _, p := range parts {
		switch {
		case p.Kind == PartReasoning && p.Reasoning != nil:
			pending = append(pending, *p.Reasoning)
		case p.Kind == PartToolCall:
			flush(p.Call.ID)
		case p.Kind == PartText && p.Text != "":
			flush("")
		}
	}
	flush("")
	return out
}

// WithChatReasoning places the reasoning entries among an assistant message's text
// and tool call parts: the entries before the text first (those before the first
// call when none is), then the text, then each call after its own entries.
func WithChatReasoning(entries []ChatReasoning, parts []Part) []Part {
	if len(entries) == 0 {
		return parts
	}
	byCall := map[string][]Reasoning{}
	var lead []Reasoning
	for _, e := range entries {
		if e.Before == "" {
			lead = append(lead, e.Reasoning)
			continue
		}
		byCall[e.Before] = append(byCall[e.Before], e.Reasoning)
	}
	placed := map[string]bool{}
	if len(lead) == 0 {
		for _, p := range parts {
			if p.Kind == PartToolCall {
				lead, placed[p.Call.ID] = byCall[p.Call.ID], true
				break
			}
		}
	}
	out := make([]Part, 0, len(parts)+len(entries))
	for i := range lead {
		out = append(out, Part{Kind: PartReasoning, Reasoning: &lead[i]})
	}
	for _, p := range parts {
		if p.Kind == PartToolCall && !placed[p.Call.ID] {
			for _, r := range byCall[p.Call.ID] {
				out = append(out, Part{Kind: PartReasoning, Reasoning: &r})
			}
			placed[p.Call.ID] = true
		}
		out = append(out, p)
	}
	// Entries of calls the message does not have (a client that dropped a call) go
	// last rather than nowhere.
	for _, e := range entries {
		if e.Before != "" && !placed[e.Before] {
			out = append(out, Part{Kind: PartReasoning, Reasoning: &e.Reasoning})
			placed[e.Before] = true
		}
	}
	return out
}

// ChatReasoningValues are the Chat fields of parts' reasoning: a Chat model's own
// reasoning_content alone (nil entries), or another protocol's state as entries with
// the readable text as reasoning_content (nil: none).
func ChatReasoningValues(parts []Part) (content *string, entries []ChatReasoning) {
	entries = chatReasoningOf(parts)
	if len(entries) == 0 {
		return nil, nil
	}
	var text []string
	native := true
	for _, e := range entries {
		native = native && e.Protocol == OpenAIChat
		if e.Text != "" {
			text = append(text, e.Text)
		}
	}
	if native {
		s := strings.Join(text, "") // the empty texts add nothing
		return &s, nil
	}
	if len(text) > 0 {
		s := strings.Join(text, "\n\n")
		return &s, entries
	}
	return nil, entries
}

// Readable is the reasoning in words: its text, or a Responses item's summary texts.
func (r *Reasoning) Readable() string {
	if r.Text != "" {
		return r.Text
	}
	return strings.Join(r.Summary, "\n\n")
}

// Off reports whether c turns thinking off: thinking disabled, or an effort of none.
func (c *ReasoningConfig) Off() bool { return c.Disabled || c.Effort == "none" }

// ReasoningNotes names, in the words of a client of protocol client, the reasoning
// settings of c that a model of protocol target (model: the provider's model name)
// cannot take, so the answer says so rather than dropping them silently. An effort
// and a budget map onto each other (EffortOf, BudgetOf) and are carried; what no
// mapping carries is named: a summary request to a model whose answer gives the
// client no readable reasoning, adaptive thinking to a model that takes only an
// effort, and thinking turned off for a model that cannot turn it off.
func ReasoningNotes(client Protocol, c *ReasoningConfig, target Protocol, model string) []string {
	if c == nil {
		return nil
	}
	var notes []string
	if c.Summary != "" && !c.Off() {
		switch {
		case target == OpenAIChat && client != AnthropicMessages:
			// A Messages client's thinking asks for the reasoning in words
			// (anthropicThinking), which a Chat thinking model gives unasked.
			notes = append(notes, fmt.Sprintf("reasoning.summary is not honoured: %s is not asked for reasoning summaries (its Chat Completions API has no such setting)", model))
		case target == AnthropicMessages && !c.Adaptive && c.BudgetOf() == 0:
			notes = append(notes, fmt.Sprintf("reasoning.summary is not honoured: %s thinks only when reasoning.effort is set", model))
		}
	}
	if c.Adaptive && (target == OpenAIChat || target == OpenAIResponses) {
		notes = append(notes, fmt.Sprintf("thinking.type adaptive is not honoured: %s takes a reasoning effort, and thinks at its default", model))
	}
	if c.Off() && target == Gemini && !GeminiCanStopThinking(model) {
		notes = append(notes, fmt.Sprintf("%s is not honoured: %s cannot turn thinking off, and thinks at its lowest setting", cmp.Or(offParams[client], "reasoning_effort none"), model))
	}
	return notes
}

// GeminiMinBudget is Gemini 2.5 Pro's least thinkingBudget (Gemini API thinking
// docs: 128 to 32768, thinking cannot be disabled).
const GeminiMinBudget = 128

// GeminiCanStopThinking reports whether a Gemini model takes a thinking budget of 0:
// the 2.x Flash models do; 2.5 Pro and Gemini 3 (a thinkingLevel, low at least) do not.
func GeminiCanStopThinking(model string) bool {
	return GeminiVersion(model) < 3 && !strings.Contains(model, "pro")
}

// offParams are how a client of each protocol turns thinking off (Chat's
// reasoning_effort none for any other).
var offParams = map[Protocol]string{AnthropicMessages: "thinking.type disabled", OpenAIResponses: "reasoning.effort none"}

// ReasonsUnasked reports whether an OpenAI model name is a reasoning model's, which
// reasons at its default effort when a request sets none (and refuses
// include reasoning.encrypted_content if it is not one): the o-series, gpt-5 but not
// gpt-5-chat, the codex models, told apart by name as OpenAI's SDKs do. A
// deployment under another name says so in its model route (config "reasoning").
func ReasonsUnasked(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // a router's "openai/gpt-5"
	}
	switch {
	case strings.Contains(m, "codex"):
		return true
	case strings.HasPrefix(m, "gpt-5"):
		return !strings.HasPrefix(m, "gpt-5-chat") && !strings.Contains(m, "-chat-")
	}
	return len(m) > 1 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9'
}

var geminiVersionRE = regexp.MustCompile(`^(?:models/)?gemini-(\d+)`)

// GeminiVersion is the major version of a Gemini model name (0: not one).
func GeminiVersion(model string) int {
	m := geminiVersionRE.FindStringSubmatch(model)
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(m[1])
	return v
}
