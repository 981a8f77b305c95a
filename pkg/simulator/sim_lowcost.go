package simulator

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
)

// lowCostRoutes serves Perplexity's Agent and Search APIs and the low-cost search
// APIs (Cloudflare Web Search, Parallel Search, Linkup), each at its documented path
// under /<kind>, with pages generated from the query in the shape of the kind's
// constructed docs-shape fixture (which "sim:fixture" returns as it is) and failures
// in the provider's own error envelope.
func lowCostRoutes() []engineRoute {
	pplxError := func(status int) []byte {
		return fmt.Appendf(nil, `{"error":{"message":"simulated Perplexity failure (HTTP %d)","type":"%s","code":%d}}`, status, moonshotErrorType(status), status)
	}
	return []engineRoute{
		{
			kind:      "perplexity",
			pattern:   "POST /perplexity/v1/agent",
			queryOf:   jsonField("input"),
			ask:       perplexityAsk,
			render:    perplexityAgentBody,
			fixture:   "perplexity/docs-shape-agent-web-search.CONSTRUCTED.json",
			empty:     []byte(`{"id":"resp_sim_empty","object":"response","created_at":1764547200,"status":"completed","model":"perplexity/sonar","output":[{"type":"search_results","queries":[],"results":[]},{"type":"message","id":"msg_sim_empty","status":"completed","role":"assistant","content":[{"type":"output_text","text":"(simulated) I could not find any information on that.","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":12,"total_tokens":21,"cost":{"currency":"USD","input_cost":0,"output_cost":0,"tool_calls_cost":0.005,"total_cost":0.005}}}`),
			errorBody: pplxError,
			model:     "sonar",
		},
		{
			kind:      "perplexity-search",
			pattern:   "POST /perplexity-search/search",
			queryOf:   jsonField("query"),
			ask:       perplexityAsk,
			render:    perplexitySearchBody,
			fixture:   "perplexity/docs-shape-search.CONSTRUCTED.json",
			empty:     []byte(`{"id":"sim-empty","results":[]}`),
			errorBody: pplxError,
		},
		{
			kind:    "cloudflare",
			pattern: "POST /cloudflare/client/v4/accounts/{account}/ai/websearch/",
			queryOf: jsonField("query"),
			ask:     bodyAsk("limit", "", "", "", recencyOf),
			render:  cloudflareBody,
			fixture: "cloudflare/docs-shape-websearch.CONSTRUCTED.json",
			empty:   []byte(`{"success":true,"errors":[],"messages":[],"result":{"results":[]}}`),
			errorBody: func(status int) []byte {
				auth := "10000 Authentication error (simulated)"
				e := byStatus(status, "7000 Simulated Cloudflare failure", map[int]string{http.StatusUnauthorized: auth, http.StatusForbidden: auth,
					http.StatusTooManyRequests: "971 Please wait and consider throttling your request speed (simulated)"})
				code, msg, _ := strings.Cut(e, " ")
				return fmt.Appendf(nil, `{"success":false,"errors":[{"code":%s,"message":"%s"}],"messages":[],"result":null}`, code, msg)
			},
			options: `{"accountId":"sim-account","provider":"ceramic"}`,
		},
		{
			kind:    "parallel",
			pattern: "POST /parallel/v1/search",
			queryOf: func(_ *http.Request, b []byte) string {
				return strings.Join(jstrs(decodeBody(b)["search_queries"]), " ")
			},
			ask: bodyAsk("advanced_settings.max_results", "advanced_settings.source_policy.include_domains",
				"advanced_settings.source_policy.exclude_domains", "advanced_settings.source_policy.after_date", recencySince(time.DateOnly)),
			render:    parallelBody,
			fixture:   "parallel/docs-shape-search.CONSTRUCTED.json",
			empty:     []byte(`{"search_id":"search_sim_empty","results":[]}`),
			errorBody: parallelErrorBody,
			options:   `{"mode":"fast"}`,
		},
		{
			kind:    "linkup",
			pattern: "POST /linkup/v1/search",
			queryOf: jsonField("q"),
			ask:     bodyAsk("maxResults", "includeDomains", "excludeDomains", "fromDate", recencySince(time.DateOnly)),
			render:  linkupBody,
			fixture: "linkup/docs-shape-search-results.CONSTRUCTED.json",
			empty:   []byte(`{"results":[]}`),
			errorBody: func(status int) []byte {
				return fmt.Appendf(nil, `{"statusCode":%d,"error":{"code":"SIMULATED","message":"Simulated Linkup failure","details":[]}}`, status)
			},
			options: `{"depth":"standard"}`,
		},
	}
}

// parallelErrorBody is Parallel's {"error":{"ref_id","message","detail"}} envelope.
func parallelErrorBody(status int) []byte {
	return fmt.Appendf(nil, `{"error":{"ref_id":"simulated","message":"Simulated Parallel failure (HTTP %d)","detail":null}}`, status)
}

// perplexityAgentBody is an Agent API answer for a: a search_results item listing the
// pages, and a message with one sentence per cited page, each under a url_citation
// (reportText).
func perplexityAgentBody(a searchAsk) []byte {
	m := template("perplexity/docs-shape-agent-web-search.CONSTRUCTED.json")
	out := arr(m["output"])
	sr, msg := obj(out[0]), obj(out[1])
	hits := a.hits(defaultHits)
	fill(sr, "results", hits, func(r map[string]any, h simHit, i int) {
		r["id"], r["title"], r["url"], r["snippet"], r["date"], r["last_updated"] = i+1, h.Title, h.URL, h.Snippet, isoDay(h.Date), isoDay(h.Date)
	})
	sr["queries"] = []any{a.shown()}
	text, spans := reportText(hits, nil)
	if len(hits) == 0 {
		text = "(simulated) I could not find any information on that."
	}
	part := clone(arr(obj(msg)["content"])[0])
	part["text"], part["annotations"] = text, urlCitations(spans)
	msg["content"] = []any{part}
	m["id"] = "resp_" + a.id(24)
	return mustJSON(m)
}

// perplexitySearchBody is a Search API answer for a.
func perplexitySearchBody(a searchAsk) []byte {
	m := template("perplexity/docs-shape-search.CONSTRUCTED.json")
	fill(m, "results", a.hits(defaultHits), func(r map[string]any, h simHit, _ int) {
		r["title"], r["url"], r["snippet"], r["date"], r["last_updated"] = h.Title, h.URL, h.Snippet, isoDay(h.Date), isoDay(h.Date)
	})
	m["id"] = uuidOf(a)
	return mustJSON(m)
}

// cloudflareBody is a Web Search API answer for a, in Cloudflare's v4 envelope.
func cloudflareBody(a searchAsk) []byte {
	m := template("cloudflare/docs-shape-websearch.CONSTRUCTED.json")
	res := obj(m["result"])
	fill(res, "results", a.hits(defaultHits), func(r map[string]any, h simHit, _ int) {
		r["title"], r["url"], r["description"] = h.Title, h.URL, h.Snippet
	})
	return mustJSON(m)
}

// parallelBody is a Parallel Search answer for a: each page with two excerpts.
func parallelBody(a searchAsk) []byte {
	m := template("parallel/docs-shape-search.CONSTRUCTED.json")
	fill(m, "results", a.hits(defaultHits), func(r map[string]any, h simHit, _ int) {
		r["url"], r["title"], r["publish_date"], r["excerpts"] = h.URL, h.Title, isoDay(h.Date), []any{h.Quote, h.Snippet}
	})
	m["search_id"] = "search_" + a.id(32)
	return mustJSON(m)
}

// linkupBody is a Linkup searchResults answer for a.
func linkupBody(a searchAsk) []byte {
	m := template("linkup/docs-shape-search-results.CONSTRUCTED.json")
	fill(m, "results", a.hits(defaultHits), func(r map[string]any, h simHit, _ int) {
		r["name"], r["url"], r["content"] = h.Title, h.URL, h.Snippet
	})
	return mustJSON(m)
}

// parallelExtract is Parallel's Extract API (POST /parallel/v1/extract, x-api-key):
// a page made from each URL asked, in the shape of the documented answer
// (parallel/docs-shape-extract.CONSTRUCTED.json, "sim:fixture" in a URL returns it
// as it is); a URL with "sim:unreadable" is in the errors list, as a page Parallel
// could not read (HTTP 404). Directives and standing faults apply as to the engines.
func (s *Server) parallelExtract(w http.ResponseWriter, r *http.Request) {
	const kind = "parallel-extract"
	body, ok := s.readCounted(w, r, 8<<20, kind, r.URL.RawQuery)
	if !ok {
		return
	}
	urls := jstrs(decodeBody(body)["urls"])
	if r.Header.Get("x-api-key") == "" {
		writeError(w, http.StatusUnauthorized, parallelErrorBody(http.StatusUnauthorized))
		return
	}
	if len(urls) == 0 {
		writeError(w, http.StatusUnprocessableEntity, parallelErrorBody(http.StatusUnprocessableEntity))
		return
	}
	if !s.applyFaults(w, r, kind, r.URL.Path, strings.Join(urls, " "), parallelErrorBody, between(s.opts.EngineLatency, s.opts.EngineLatencyMax, body)) {
		return
	}
	if strings.Contains(urls[0], "sim:fixture") {
		writeJSON(w, fixtures.Read("parallel/docs-shape-extract.CONSTRUCTED.json"))
		return
	}
	m := template("parallel/docs-shape-extract.CONSTRUCTED.json")
	tmpl := obj(arr(m["results"])[0])
	results, errs := []any{}, []any{}
	for _, u := range urls {
		if strings.Contains(u, "sim:unreadable") {
			errs = append(errs, map[string]any{"url": u, "error_type": "fetch_error", "http_status_code": 404, "content": "Error fetching content from " + u})
			continue
		}
		res := maps.Clone(tmpl)
		title := "(simulated) " + u
		text := "(simulated page) The page at " + u + " says what the simulator makes of it: its address, and this line."
		res["url"], res["title"], res["excerpts"], res["full_content"] = u, title, []any{text}, "# "+title+"\n\n"+text
		results = append(results, res)
	}
	m["results"], m["errors"] = results, errs
	writeJSON(w, mustJSON(m))
}
