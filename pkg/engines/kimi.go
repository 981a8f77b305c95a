package engines

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
)

// kimi is Moonshot Kimi with its builtin $web_search function, an adapter over the
// Kimi model caller (pkg/llm/nativechat, over llm.Client; default base
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
	opts kimiOptions
}

type kimiOptions struct {
	SystemPrompt string `json:"systemPrompt,omitempty"`
}

// kimiSystemPrompt is the default instruction: the answer's links are the only way the
// sources come back, so it asks for them.
const kimiSystemPrompt = "Use the $web_search tool to search the web for the user's query, then answer concisely in the language of the query. " +
	"Cite every page you use as a markdown link [page title](url) right after the statement it supports."

func newKimi(cfg Config, hc *http.Client) (Engine, error) {
	e := &kimi{}
	e.chatGrounded = chatGrounded{client: newClient(cfg, hc, "https://api.moonshot.cn/v1"), model: cmp.Or(cfg.Model, "kimi-k2-turbo-preview"), kind: e}
	if err := cfg.options(&e.opts); err != nil {
		return nil, err
	}
	e.opts.SystemPrompt = cmp.Or(e.opts.SystemPrompt, kimiSystemPrompt)
	e.price = cfg.price(0.03 * glmUSDPerCNY)
	return e, nil
}

// run searches through the Kimi model caller on hc: the fleet's web_search function
// offered, which the caller replaces with $web_search; the answer's links are its
// cited pages.
func (e *kimi) run(ctx context.Context, hc *http.Client, q Query) (*Result, error) {
	call := nativechat.NewForEngine(nativechat.Kimi, llm.NewClientWith(e.id, e.baseURL, e.credentials(), hc))
	fn := map[string]any{"type": "function", "function": map[string]any{"name": llm.WebSearchTool, "parameters": map[string]any{"type": "object"}}}
	body, _ := json.Marshal(map[string]any{"model": e.model, "tools": []any{fn},
		"messages": []map[string]string{{"role": "system", "content": e.opts.SystemPrompt}, {"role": "user", "content": q.Query}}})
	comp, err := call.Complete(ctx, body, nil)
	if err != nil {
		return nil, e.modelError(err)
	}
	res, native, err := e.chatAnswer(comp)
	if err != nil || native == nil {
		return res, err
	}
	citedPages(res, native.Sources)
	if native.Unfinished {
		res.warnf("Kimi was still searching after %d rounds; the answer is missing", native.Requests)
	}
	res.Usage.Searches = native.Requests
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	return res, nil
}
