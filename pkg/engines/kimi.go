package engines

import (
	"cmp"
	"context"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// kimi is Moonshot Kimi with its builtin $web_search function, an adapter over the
// Kimi model codec (openaichat.Kimi, called by upstream.Caller; default base
// https://api.moonshot.cn/v1, default model kimi-k2-turbo-preview): the search rounds
// (the model names $web_search, the call is echoed back, Moonshot searches and the
// model answers; thinking switched off for the models that need it) and the citing of
// the answer's links as [n] markers live there, for main models and engines alike.
// The search results never appear in the response: the sources are the links of the
// answer, which the default system prompt asks for.
//
// Options: {"systemPrompt": "…"}. Pricing: ¥0.03 per $web_search call (docs) at
// glmUSDPerCNY; tokens, which include the search results on the final round, are
// reported in Usage but not priced.
type kimi struct {
	chatGrounded
	system string // the system prompt
}

// kimiSystemPrompt is the default instruction: the answer's links are the only way the
// sources come back, so it asks for them.
const kimiSystemPrompt = "Use the $web_search tool to search the web for the user's query, then answer concisely in the language of the query. " +
	"Cite every page you use as a markdown link [page title](url) right after the statement it supports."

func newKimi(cfg Config, hc *http.Client) (Engine, error) {
	e := &kimi{}
	e.chatGrounded = chatGrounded{client: newClient(cfg, hc, "https://api.moonshot.cn/v1"), model: cmp.Or(cfg.Model, "kimi-k2-turbo-preview"), kind: e}
	var o struct {
		SystemPrompt string `json:"systemPrompt,omitempty"`
	}
	if err := optionsOf(cfg, &o); err != nil {
		return nil, err
	}
	e.system = cmp.Or(o.SystemPrompt, kimiSystemPrompt)
	e.price = priceOf(cfg, 0.03*glmUSDPerCNY)
	return e, nil
}

// run searches through the Kimi model codec on hc; the answer's links are its cited
// pages.
func (e *kimi) run(ctx context.Context, hc *http.Client, q Query) (*Result, error) {
	call := e.modelCaller(openaichat.Kimi, e.baseURL, hc)
	req := &wire.Request{Model: e.model, System: e.system, Search: &llm.SearchOptions{Requested: true},
		Messages: userTurn(q.Query)}
	answer, err := call.Answer(ctx, req)
	if err != nil {
		return nil, e.modelError(err)
	}
	summary, cited := answer.MarkedText()
	res := &Result{Summary: summary, Usage: Usage{InputTokens: answer.Usage.InputTokens, OutputTokens: answer.Usage.OutputTokens}}
	if answer.Stop == wire.StopMaxTokens {
		res.partialf("the answer was cut at the model's token limit")
	}
	citedPages(res, cited)
	if answer.Paused {
		res.warnf("Kimi was still searching after %d rounds; the answer is missing", answer.Usage.WebSearches)
	}
	res.Usage.Searches = answer.Usage.WebSearches
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	return res, nil
}
