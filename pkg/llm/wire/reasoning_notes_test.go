package wire_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Every reasoning setting a client can send, to every kind of model: the request's
// notes name the setting, in the client's own parameter name, exactly when the
// model's codec cannot carry it (an effort and a budget map onto each other and are
// carried, and a Gemini model returns its thought summaries; a summary to a model whose
// answer gives no readable reasoning, adaptive
// thinking to an effort-only model, and thinking turned off for a model that always
// thinks are not).
func TestReasoningNotesNameWhatTheModelCannotTake(t *testing.T) {
	t.Parallel()
	type target struct {
		p     wire.Protocol
		model string
	}
	var (
		chat      = target{wire.OpenAIChat, "deepseek-reasoner"}
		resp      = target{wire.OpenAIResponses, "gpt-5"}
		claude    = target{wire.AnthropicMessages, "claude-sonnet-4-5"}
		flash     = target{wire.Gemini, "gemini-2.5-flash"}
		pro25     = target{wire.Gemini, "gemini-2.5-pro"}
		gemini3   = target{wire.Gemini, "gemini-3-pro-preview"}
		everyKind = []target{chat, resp, claude, flash, pro25, gemini3}
	)
	cases := []struct {
		name   string
		client wire.ClientCodec
		body   string
		// noted are the targets whose notes name the setting, each with the words.
		noted map[target]string
	}{
		{"chat effort", openaichat.Client, `"reasoning_effort":"high"`, nil},
		{"chat effort none", openaichat.Client, `"reasoning_effort":"none"`, map[target]string{pro25: "reasoning_effort none", gemini3: "reasoning_effort none"}},
		{"responses effort and summary", responses.Client, `"reasoning":{"effort":"low","summary":"auto"}`,
			map[target]string{chat: "reasoning.summary"}},
		{"responses summary alone", responses.Client, `"reasoning":{"summary":"detailed"}`,
			map[target]string{chat: "reasoning.summary", claude: "reasoning.summary"}},
		{"responses effort none", responses.Client, `"reasoning":{"effort":"none","summary":"auto"}`, map[target]string{pro25: "reasoning.effort none", gemini3: "reasoning.effort none"}},
		// Every model's reasoning reaches a Messages client as thinking blocks.
		{"messages budget", anthropic.Client, `"thinking":{"type":"enabled","budget_tokens":4096}`, nil},
		{"messages adaptive", anthropic.Client, `"thinking":{"type":"adaptive"}`, map[target]string{chat: "thinking.type adaptive", resp: "thinking.type adaptive"}},
		{"messages disabled", anthropic.Client, `"thinking":{"type":"disabled"}`, map[target]string{pro25: "thinking.type disabled", gemini3: "thinking.type disabled"}},
	}
	for _, c := range cases {
		body := fmt.Sprintf(`{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":"hi"}],%s}`, c.body)
		if c.client == responses.Client {
			body = fmt.Sprintf(`{"model":"m","input":"hi",%s}`, c.body)
		}
		req, err := c.client.DecodeRequest([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, tg := range everyKind {
			notes := wire.ReasoningNotes(c.client.Protocol(), req.Reasoning, tg.p, tg.model)
			want, dropped := c.noted[tg]
			switch {
			case !dropped && len(notes) > 0:
				t.Errorf("%s → %s: nothing is dropped, but the notes say %q", c.name, tg.model, notes)
			case dropped && !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, want) && strings.Contains(n, tg.model) }):
				t.Errorf("%s → %s: notes %q; want one naming %q and the model", c.name, tg.model, notes, want)
			}
		}
	}
}

// Thinking turned off reaches a Gemini 2.5 Flash model as a thinkingBudget of 0 (a
// Chat reasoning_effort of none included), and Gemini 2.5 Pro, which refuses 0, as
// its least budget.
func TestGeminiThinkingOff(t *testing.T) {
	t.Parallel()
	req, err := openaichat.Client.DecodeRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]int{"gemini-2.5-flash": 0, "gemini-2.5-pro": 128} {
		b, err := gemini.Model.EncodeRequest(req, model)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			GenerationConfig struct {
				ThinkingConfig map[string]int `json:"thinkingConfig"`
			} `json:"generationConfig"`
		}
		json.Unmarshal(b, &out)
		if got, ok := out.GenerationConfig.ThinkingConfig["thinkingBudget"]; !ok || got != want {
			t.Errorf("%s: thinkingConfig %v; want thinkingBudget %d", model, out.GenerationConfig.ThinkingConfig, want)
		}
	}
}
