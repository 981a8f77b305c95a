package engines

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
)

// glmChat is Zhipu GLM chat completions with the embedded web_search tool
// (POST {base}/chat/completions, bearer key): one request, the model searches and
// answers, and the search results come back in a top-level "web_search" array next to
// "choices" (WIRE_FORMATS.md §4a, seed 001). The tool, the web_search array and the
// ref markers are read by pkg/llm/nativechat, as for a GLM main model (cited pages by
// first citation, then the uncited results). The default base is the mainland
// endpoint https://open.bigmodel.cn/api/paas/v4 (Z.AI accounts set
// https://api.z.ai/api/paas/v4); the default model is glm-4.7.
//
// Options:
//
//	{"searchEngine": "search_pro",  // search_std | search_pro | search_pro_sogou | search_pro_quark (Z.AI: search-prime, …)
//	 "contentSize": "medium",       // medium | high: how much page text the model reads
//	 "searchPrompt": "",            // Zhipu's search_prompt template, "{search_result}" marks the results
//	 "thinking": ""}                // "disabled" turns GLM-4.7's default reasoning off (faster answers)
//
// search_pro is the default because it is what Zhipu's own examples use and it is
// markedly better than search_std for ¥0.02 more. Pricing: Zhipu bills per search by
// engine (search_std ¥0.01, search_pro ¥0.03, sogou/quark ¥0.05), converted at
// glmUSDPerCNY; model tokens are reported in Usage but not priced, since they depend on
// the account's model plan.
type glmChat struct {
	chatGrounded
	opts glmOptions
}

func newGLMChat(cfg Config, hc *http.Client) (Engine, error) {
	e := &glmChat{}
	e.chatGrounded = chatGrounded{client: newClient(cfg, hc, glmDefaultBase), model: cmp.Or(cfg.Model, "glm-4.7"), kind: e}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	e.opts.SearchEngine = cmp.Or(e.opts.SearchEngine, "search_pro")
	e.opts.ContentSize = cmp.Or(e.opts.ContentSize, "medium")
	e.price = priceOf(cfg, glmSearchPrice(e.opts.SearchEngine))
	// Recency and count map onto the tool's own fields; the domain filter takes one domain
	// (the first allowed one is sent and hits are checked against all of them); there is
	// no block list, language or country.
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true}
	return e, nil
}

// run makes the one call of a search: a chat completion with GLM's web_search tool
// (nativechat.GLMTool) through upstream.Caller.Send, the search results read from the
// body's web_search array (nativechat.GLMResults) and cited as for a main model.
func (e *glmChat) run(ctx context.Context, hc *http.Client, q Query) (*Result, error) {
	// search_query pins what is searched to the query itself (cut to the Web Search
	// API's 70 characters; the model still reads the whole query, so no warning).
	tool := nativechat.GLMTool(nativechat.GLMSearch{Engine: e.opts.SearchEngine, Query: glmTruncateQuery(q.Query), Prompt: e.opts.SearchPrompt,
		Count: q.Count, DomainFilter: glmDomainFilter(q), RecencyFilter: string(q.Recency), ContentSize: e.opts.ContentSize})
	req := map[string]any{"model": e.model, "messages": []map[string]string{{"role": "user", "content": q.Query}}, "tools": []json.RawMessage{tool}}
	if e.opts.Thinking != "" {
		req["thinking"] = map[string]string{"type": e.opts.Thinking}
	}
	body, err := e.send(ctx, openaichat.Model, hc, e.model, req)
	if err != nil {
		return nil, e.glmModelError(err)
	}
	comp, err := llm.ParseCompletion(body)
	if err != nil {
		return nil, e.glmModelError(err)
	}
	var msg struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(comp.Message, &msg); err != nil {
		return nil, &Error{Kind: Decode, Engine: e.id, Message: "reading the answer: " + redact.Truncate(err.Error(), 200)}
	}
	res := &Result{Summary: llm.Text(msg.Content), Usage: Usage{Searches: 1, InputTokens: comp.Usage.PromptTokens,
		OutputTokens: comp.Usage.CompletionTokens, CostUSD: e.price}}
	switch comp.FinishReason {
	case "length":
		res.partialf("the answer was cut at the model's token limit")
	case "sensitive":
		return nil, &Error{Kind: BadRequest, Engine: e.id, Message: "Zhipu's content filter stopped the answer (finish_reason sensitive)"}
	case "network_error":
		return nil, &Error{Kind: Unavailable, Engine: e.id, Message: "Zhipu reported a network error while answering (finish_reason network_error)"}
	}
	items := nativechat.GLMResults(body)
	summary, cited := nativechat.GLMCite(res.Summary, items)
	byLink := map[string]Hit{}
	for _, it := range slices.Backward(items) {
		byLink[it.Link] = glmHit(it) // the first result of a link
	}
	var p pages
	for _, s := range cited {
		p.cite(byLink[s.URL])
	}
	for _, it := range items {
		p.add(glmHit(it))
	}
	p.citedFirst(res, q.Count)
	res.Summary = summary
	glmCheckDomains(res, q)
	return res, nil
}

// glmModelError is a failed call with Zhipu's own error code, where it gave one,
// deciding the kind (glmCodeKind) and leading the message.
func (e *glmChat) glmModelError(err error) error {
	out := e.modelError(err)
	var le *llm.Error
	var ee *Error
	if !errors.As(err, &le) || !errors.As(out, &ee) || le.Code == "" {
		return out
	}
	ee.Kind = cmp.Or(glmCodeKind(le.Code), ee.Kind)
	ee.Message = e.redact(redact.Truncate(le.Code+": "+le.Message, 300))
	return ee
}
