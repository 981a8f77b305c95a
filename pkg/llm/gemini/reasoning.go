package gemini

import (
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// partsSigned reports whether parts carry a Gemini thought signature: the model made
// their calls, and the sentinel signature is not for them.
func partsSigned(parts []wire.Part) bool {
	for _, p := range parts {
		if rs, ok := wire.ReasoningFor(p, wire.Gemini); ok && rs.Signature != "" {
			return true
		}
	}
	return false
}

// thinkingConfig is a request's generationConfig.thinkingConfig: Gemini 3 takes a
// thinkingLevel (low, high), earlier models a thinkingBudget (-1: dynamic, for
// adaptive; 0: off, or the least a model that cannot turn it off takes);
// includeThoughts when the request asked for reasoning summaries.
func thinkingConfig(c *wire.ReasoningConfig, model string) map[string]any {
	if c == nil {
		return nil
	}
	tc := map[string]any{}
	if gemini3(model) {
		switch c.EffortOf() {
		case "none", "minimal", "low":
			tc["thinkingLevel"] = "low"
		case "":
		default:
			tc["thinkingLevel"] = "high"
		}
	} else {
		switch {
		case c.Off() && wire.GeminiCanStopThinking(model):
			tc["thinkingBudget"] = 0
		case c.Off():
			tc["thinkingBudget"] = wire.GeminiMinBudget // the least a model that always thinks takes
		case c.Adaptive:
			tc["thinkingBudget"] = -1
		case c.BudgetOf() > 0:
			tc["thinkingBudget"] = c.BudgetOf()
		}
	}
	if c.Summary != "" && !c.Disabled {
		tc["includeThoughts"] = true
	}
	if len(tc) == 0 {
		return nil
	}
	return tc
}
