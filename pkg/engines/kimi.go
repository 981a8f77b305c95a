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
	client
	model string
	opts  kimiOptions
	price float64
}

type kimiOptions struct {
	SystemPrompt string `json:"systemPrompt,omitempty"`
}

// kimiSystemPrompt is the default instruction: the answer's links are the only way the
// sources come back, so it asks for them.
const kimiSystemPrompt = "Use the $web_search tool to search the web for the user's query, then answer concisely in the language of the query. " +
	"Cite every page you use as a markdown link [page title](url) right after the statement it supports."

func newKimi(cfg Config, hc *http.Client) (Engine, error) {
	e := &kimi{client: newClient(cfg, hc, "https://api.moonshot.cn/v1"), model: cmp.Or(cfg.Model, "kimi-k2-turbo-preview")}
	if err := cfg.options(&e.opts); err != nil {
		return nil, err
	}
	e.opts.SystemPrompt = cmp.Or(e.opts.SystemPrompt, kimiSystemPrompt)
	e.price = cfg.price(0.03 * glmUSDPerCNY)
	return e, nil
}

func (e *kimi) Name() string { return e.id }

func (e *kimi) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, &Error{Kind: Auth, Engine: e.id, Message: "no API key configured"}
	}
	return e.run(ctx, e.hc, q)
}

func (e *kimi) parse(q Query, bodies [][]byte) (*Result, error) {
	rp := replay(bodies)
	return e.run(context.Background(), &http.Client{Transport: &rp}, q)
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
	var m struct {
		Content json.RawMessage   `json:"content"`
		Native  *llm.NativeSearch `json:"searchfleet_native"` // llm.NativeKey
	}
	if err := json.Unmarshal(comp.Message, &m); err != nil {
		return nil, &Error{Kind: Decode, Engine: e.id, Message: "reading the answer: " + truncate(err.Error(), 200)}
	}
	res := &Result{Summary: llm.Text(m.Content), Usage: Usage{InputTokens: comp.Usage.PromptTokens, OutputTokens: comp.Usage.CompletionTokens}}
	if comp.FinishReason == "length" {
		res.warnf("the answer was cut at the model's token limit")
	}
	if m.Native == nil {
		return res, nil
	}
	citedPages(res, m.Native.Sources)
	if m.Native.Unfinished {
		res.warnf("Kimi was still searching after %d rounds; the answer is missing", m.Native.Requests)
	}
	res.Usage.Searches = m.Native.Requests
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	return res, nil
}
