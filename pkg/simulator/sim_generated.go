package simulator

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/fixtures"
)

// The renderers below write an ask's generated pages (results.go) in each provider's
// wire shape. Each starts from the provider's recorded fixture and replaces what the
// recording found with the generated pages, keeping the recording's fields and
// envelope: only values change, no field is invented.

// templates holds each fixture decoded once (fixture name → map[string]any), never
// changed: template hands out copies.
var templates sync.Map

// template decodes a fixture into a fresh value the caller may change.
func template(name string) map[string]any { return clone(shared(name)) }

// shared is a fixture decoded once, shared by every answer: the caller changes none
// of it, but may change a shallow copy (maps.Clone) of any object on the way to a value it
// replaces, so only those objects are copied.
func shared(name string) map[string]any {
	v, ok := templates.Load(name)
	if !ok {
		var m map[string]any
		if err := json.Unmarshal(fixtures.Read(name), &m); err != nil {
			panic("simulator: fixture " + name + ": " + err.Error())
		}
		v, _ = templates.LoadOrStore(name, m)
	}
	return v.(map[string]any)
}

// obj and arr read a decoded JSON value as an object or an array (nil when it is not).
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func arr(v any) []any          { a, _ := v.([]any); return a }

// clone deep-copies a decoded JSON object (nil when v is not one).
func clone(v any) map[string]any {
	m, _ := deepCopy(v).(map[string]any)
	return m
}

// deepCopy copies a decoded JSON value's objects and arrays; its scalars (strings,
// numbers, booleans, null) are immutable and shared.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("simulator: " + err.Error())
	}
	return b
}

// opaque is a stable base64 token standing for a provider's encrypted or signed data.
func opaque(parts ...string) string {
	s := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return base64.StdEncoding.EncodeToString(append([]byte("searchfleet-simulated:"), s[:24]...))
}

// uuidOf is the ask's id in the 8-4-4-4-12 form some providers give their requests.
func uuidOf(a searchAsk) string {
	h := a.id(32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

func isoDay(t time.Time) string { return t.Format("2006-01-02") }

// --- classic search APIs ---------------------------------------------------------------

// braveBody is Brave's web search answer for a: the recorded docs-shape body with its
// web results replaced (the videos cluster dropped).
func braveBody(a searchAsk) []byte {
	// Copied on the way to what changes (shared): the rest of the recorded body is
	// written as it is, not copied for every answer.
	m := maps.Clone(shared("brave/docs-shape-web-search.CONSTRUCTED.json"))
	query := maps.Clone(obj(m["query"]))
	m["query"] = query
	query["original"] = a.query
	hits := a.hits(defaultHits)
	web := maps.Clone(obj(m["web"]))
	m["web"] = web
	tmpl := obj(arr(web["results"])[0])
	var results, main []any
	for i, h := range hits {
		r := maps.Clone(tmpl) // every field it changes is replaced whole
		path := strings.TrimPrefix(h.URL, "https://"+h.Host)
		r["title"], r["url"], r["description"] = h.Title, h.URL, html.EscapeString(h.Snippet)
		r["page_age"], r["age"] = h.Date.Format("2006-01-02T15:04:05"), h.Date.Format("January 2, 2006")
		r["profile"] = map[string]any{"name": h.Host, "url": h.URL, "long_name": h.Host, "img": "https://imgs.search.brave.com/favicon-" + strings.SplitN(h.Host, ".", 2)[0] + ".png"}
		r["meta_url"] = map[string]any{"scheme": "https", "netloc": h.Host, "hostname": h.Host, "favicon": "https://imgs.search.brave.com/favicon-" + strings.SplitN(h.Host, ".", 2)[0] + ".png", "path": "› " + strings.Trim(path, "/")}
		r["extra_snippets"] = []any{"Simulated extra snippet: " + h.Quote}
		results = append(results, r)
		main = append(main, map[string]any{"type": "web", "index": i, "all": false})
	}
	web["results"] = nonNil(results)
	delete(m, "videos")
	mixed := maps.Clone(obj(m["mixed"]))
	m["mixed"] = mixed
	mixed["main"] = nonNil(main)
	query["more_results_available"] = len(hits) > 0
	return mustJSON(m)
}

// searxngBody is SearXNG's JSON answer for a.
func searxngBody(a searchAsk) []byte {
	m := template("searxng/docs-shape-search.CONSTRUCTED.json")
	m["query"] = a.query
	engines := []string{"duckduckgo", "brave", "startpage", "bing"}
	fill(m, "results", a.hits(defaultHits), func(r map[string]any, h simHit, i int) {
		eng := engines[i%len(engines)]
		r["url"], r["title"], r["content"] = h.URL, h.Title, h.Snippet
		r["publishedDate"] = h.Date.Format("2006-01-02T15:04:05")
		r["engine"], r["engines"], r["positions"] = eng, []any{eng}, []any{i + 1}
		r["parsed_url"] = []any{"https", h.Host, strings.TrimPrefix(h.URL, "https://"+h.Host), "", "", ""}
		r["score"] = 1 / float64(i+1)
	})
	m["suggestions"] = []any{a.shown() + " news", a.shown() + " explained"}
	m["unresponsive_engines"] = []any{}
	return mustJSON(m)
}

// exaBody is Exa's search answer for a, with highlights.
func exaBody(a searchAsk) []byte {
	m := template("exa/docs-shape-search-highlights.CONSTRUCTED.json")
	m["requestId"] = a.id(32)
	fill(m, "results", a.hits(defaultHits), func(r map[string]any, h simHit, _ int) {
		r["id"], r["url"], r["title"] = h.URL, h.URL, h.Title
		r["publishedDate"] = h.Date.Format("2006-01-02T15:04:05.000Z")
		r["author"], r["score"] = "searchfleet simulator", h.Score/2
		r["image"], r["favicon"] = "https://"+h.Host+"/image.png", "https://"+h.Host+"/favicon.ico"
		r["highlights"] = []any{h.Snippet}
	})
	return mustJSON(m)
}

// serperBody is Serper's Google answer for a: organic results (the knowledge graph,
// answer box and people-also-ask of the recorded query dropped).
func serperBody(a searchAsk) []byte {
	m := template("serper/docs-shape-search.CONSTRUCTED.json")
	sp := obj(m["searchParameters"])
	sp["q"] = a.query
	if a.count > 0 {
		sp["num"] = a.count
	}
	m["organic"] = arr(m["organic"])[2:3] // the plain one: title, link, snippet, date, position
	fill(m, "organic", a.hits(defaultHits), func(r map[string]any, h simHit, i int) {
		r["title"], r["link"], r["snippet"], r["date"], r["position"] = h.Title, h.URL, h.Snippet, h.Date.Format("Jan 2, 2006"), i+1
	})
	delete(m, "knowledgeGraph")
	delete(m, "answerBox")
	delete(m, "peopleAlsoAsk")
	m["relatedSearches"] = []any{map[string]any{"query": a.shown() + " news"}, map[string]any{"query": a.shown() + " explained"}}
	return mustJSON(m)
}

// tavilyBody is Tavily's search answer for a.
func tavilyBody(a searchAsk) []byte {
	m := template("tavily/pydantic-test_basic_search.response.json")
	m["query"], m["request_id"] = a.query, uuidOf(a)
	fill(m, "results", a.hits(defaultHits), func(r map[string]any, h simHit, _ int) {
		r["title"], r["url"], r["content"], r["score"] = h.Title, h.URL, h.Snippet, h.Score
	})
	return mustJSON(m)
}

// glmAPIBody is Zhipu's web search API answer for a.
func glmAPIBody(a searchAsk) []byte {
	m := template("zhipu/realcase-web-search-api-search-std.response.json")
	m["id"], m["request_id"] = a.id(30), a.id(30)
	intent := obj(arr(m["search_intent"])[0])
	intent["keywords"], intent["query"] = a.query, a.query
	fill(m, "search_result", a.hits(defaultHits), glmItem)
	return mustJSON(m)
}

// glmItem sets one Zhipu search result item (the search API's and GLM chat's web_search).
func glmItem(r map[string]any, h simHit, i int) {
	r["title"] = h.Title + "（发布时间：" + h.Date.Format("2006-01-02 15:04:05") + "）"
	r["content"], r["link"], r["media"], r["refer"] = h.Snippet, h.URL, h.Host, fmt.Sprintf("ref_%d", i+1)
	r["icon"], r["publish_date"] = "https://"+h.Host+"/favicon.ico", isoDay(h.Date)
}

// --- LLM-grounded answers ---------------------------------------------------------------

// geminiBody is a generateContent answer grounded on a's pages: prefix and one cited
// sentence per page, groundingSupports over their UTF-8 byte offsets.
func geminiBody(a searchAsk, model, id, prefix string) []byte {
	m := template("gemini/pydantic-generate-websearch-sf.response.json")
	hits := a.hits(defaultHits)
	text := prefix
	var supports, chunks []any
	for i, s := range groundedText(hits) {
		if i > 0 {
			text += " "
		}
		seg := map[string]any{"endIndex": len(text) + len(s), "text": s}
		if len(text) > 0 {
			seg["startIndex"] = len(text) // Google omits a zero startIndex
		}
		supports = append(supports, map[string]any{"groundingChunkIndices": []any{i}, "segment": seg})
		text += s
	}
	for _, h := range hits {
		chunks = append(chunks, map[string]any{"web": map[string]any{"title": h.Host, "uri": h.URL}})
	}
	if len(hits) == 0 {
		text += "(simulated) The search found nothing for this query."
	}
	c := obj(arr(m["candidates"])[0])
	obj(arr(obj(c["content"])["parts"])[0])["text"] = text
	gm := obj(c["groundingMetadata"])
	gm["groundingChunks"], gm["groundingSupports"] = nonNil(chunks), nonNil(supports)
	gm["webSearchQueries"] = []any{a.shown()}
	gm["searchEntryPoint"] = map[string]any{"renderedContent": `<div class="container"><div class="headline">Google Search suggestions (simulated)</div><div class="carousel"><a class="chip" href="https://www.google.com/search?q=` +
		strings.ReplaceAll(html.EscapeString(a.shown()), " ", "+") + `">` + html.EscapeString(a.shown()) + `</a></div></div>`}
	m["modelVersion"], m["responseId"] = model, "sim-"+id
	return mustJSON(m)
}

// responsesBody is an OpenAI Responses answer that searched for a: one web_search_call
// (with its sources) and a message whose sentences each end in a markdown link to
// their page, a url_citation annotation over the link (code point offsets).
func responsesBody(a searchAsk, model, id, prefix string) []byte {
	m := template("openai/vercel-responses-web-search-gpt5mini.json")
	hits := a.hits(defaultHits)
	var sources []any
	for _, h := range hits {
		sources = append(sources, map[string]any{"type": "url", "url": h.URL})
	}
	ws, msg := ofType(arr(m["output"]), "web_search_call", nil), ofType(arr(m["output"]), "message", nil)
	ws["id"] = "ws_sim_" + id
	ws["action"] = map[string]any{"type": "search", "query": a.shown(), "sources": nonNil(sources)}
	text, spans := linkedText(prefix, hits)
	anns := []any{}
	for i, sp := range spans {
		anns = append(anns, map[string]any{"type": "url_citation", "end_index": sp[1], "start_index": sp[0], "title": hits[i].Title, "url": hits[i].URL})
	}
	if len(hits) == 0 {
		text += "(simulated) The search found nothing for this query."
	}
	msg["id"] = "msg_sim_" + id
	part := obj(arr(msg["content"])[0])
	part["text"], part["annotations"] = text, anns
	msg["content"] = []any{part}
	m["output"] = []any{ws, msg}
	m["id"], m["model"] = "resp_sim_"+id, model
	return mustJSON(m)
}

// anthropicBody is a Messages answer that searched for a: server_tool_use, its
// web_search_tool_result, then text blocks, one per cited page with a
// web_search_result_location citation quoting it.
func anthropicBody(a searchAsk, model, id, prefix string) []byte {
	m := template("anthropic/pydantic-web-search-sf.response.json")
	hits := a.hits(defaultHits)
	blocks := arr(m["content"])
	use, result := ofType(blocks, "server_tool_use", nil), ofType(blocks, "web_search_tool_result", nil)
	cited := ofType(blocks, "text", func(b map[string]any) bool { return b["citations"] != nil })
	toolID := "srvtoolu_sim_" + id
	use["id"], use["input"] = toolID, map[string]any{"query": a.shown()}
	result["tool_use_id"] = toolID
	fill(result, "content", hits, func(r map[string]any, h simHit, _ int) {
		r["encrypted_content"], r["page_age"], r["title"], r["url"] = opaque("content", h.URL, h.Snippet), h.Date.Format("January 2, 2006"), h.Title, h.URL
	})
	content := []any{use, result}
	lead := prefix + "Based on the search results:\n\n"
	if len(hits) == 0 {
		lead = prefix + "(simulated) The search found nothing for this query."
	}
	content = append(content, map[string]any{"type": "text", "text": lead})
	ctmpl := obj(arr(cited["citations"])[0])
	for i, s := range groundedText(hits) {
		if i > 0 {
			content = append(content, map[string]any{"type": "text", "text": "\n"})
		}
		c := clone(ctmpl)
		c["cited_text"], c["encrypted_index"], c["title"], c["url"] = s, opaque("index", hits[i].URL, s), hits[i].Title, hits[i].URL
		b := clone(cited)
		b["text"], b["citations"] = s, []any{c}
		content = append(content, b)
	}
	m["content"], m["id"], m["model"] = content, "msg_sim_"+id, model
	obj(obj(m["usage"])["server_tool_use"])["web_search_requests"] = 1
	return mustJSON(m)
}

// glmChatBody is a GLM chat answer with its web_search array for a: a line that cites
// nothing (as GLM opens its answers), then sentences with [ref_N] markers, the refs in
// the top-level web_search array.
func glmChatBody(a searchAsk, model, prefix string) []byte {
	m := template("zhipu/glm-chat-finance-zh.CONSTRUCTED.json")
	delete(m, "_note")
	hits := a.hits(defaultHits)
	fill(m, "web_search", hits, glmItem)
	text := prefix + "根据搜索结果 (based on the search results):"
	for i, s := range groundedText(hits) {
		text += fmt.Sprintf("\n\n%s[ref_%d]", s, i+1)
	}
	if len(hits) == 0 {
		text = prefix + "（模拟）没有找到相关的搜索结果。"
	}
	obj(obj(arr(m["choices"])[0])["message"])["content"] = text
	m["id"], m["request_id"], m["model"] = a.id(30), a.id(30), model
	return mustJSON(m)
}

// kimiText is Kimi's final answer after its $web_search for a: no citation fields,
// markdown links to the pages it read.
func kimiText(a searchAsk, prefix string) string {
	hits := a.hits(defaultHits)
	var b strings.Builder
	b.WriteString(prefix)
	for i, s := range groundedText(hits) {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "# [%s](%s)\n\n> %s", hits[i].Title, hits[i].URL, s)
	}
	if len(hits) == 0 {
		b.WriteString("（模拟）没有找到相关的网页。")
	}
	return b.String()
}

// kimiFinalBody is the recorded round-2 answer with kimiText as its content.
func kimiFinalBody(a searchAsk, prefix string) []byte {
	m := template("moonshot/hermoonshotes-round2-final.response.json")
	obj(obj(arr(m["choices"])[0])["message"])["content"] = kimiText(a, prefix)
	return mustJSON(m)
}

// openrouterBody is an OpenRouter answer for a: sentences ending in markdown links,
// url_citation annotations over them carrying the page's content.
func openrouterBody(a searchAsk) []byte {
	m := template("openrouter/pydantic-server-tool-web-search-annotations.response.json")
	hits := a.hits(defaultHits)
	msg := obj(obj(arr(m["choices"])[0])["message"])
	tmpl := obj(arr(msg["annotations"])[0])
	text, spans := linkedText("", hits)
	anns := []any{}
	for i, sp := range spans {
		an := clone(tmpl)
		an["url_citation"] = map[string]any{"content": hits[i].Snippet, "end_index": sp[1], "start_index": sp[0], "title": hits[i].Title, "url": hits[i].URL}
		anns = append(anns, an)
	}
	if len(hits) == 0 {
		text = "(simulated) The search found nothing for this query."
	}
	msg["content"], msg["annotations"] = text, anns
	m["id"] = "gen-sim-" + a.id(20)
	return mustJSON(m)
}

// linkedText is prefix and the grounded sentences of hits, each followed by a markdown
// link to its page ("([host](url))"), with the code point span of each link.
func linkedText(prefix string, hits []simHit) (string, [][2]int) {
	text := prefix
	var spans [][2]int
	for i, s := range groundedText(hits) {
		if i > 0 {
			text += " "
		}
		link := fmt.Sprintf("([%s](%s))", hits[i].Host, hits[i].URL)
		text += s + " "
		start := utf8.RuneCountInString(text)
		text += link
		spans = append(spans, [2]int{start, start + utf8.RuneCountInString(link)})
	}
	return text, spans
}

// fill replaces the list m[key] with a copy of its first entry for each of hits, set
// by set (a JSON [] when there are none).
func fill(m map[string]any, key string, hits []simHit, set func(r map[string]any, h simHit, i int)) {
	tmpl := obj(arr(m[key])[0])
	out := []any{}
	for i, h := range hits {
		r := clone(tmpl)
		set(r, h, i)
		out = append(out, r)
	}
	m[key] = out
}

// ofType is a copy of the first item of list of type typ (and that keep keeps, when
// not nil).
func ofType(list []any, typ string, keep func(map[string]any) bool) map[string]any {
	for _, it := range list {
		if item := obj(it); item["type"] == typ && (keep == nil || keep(item)) {
			return clone(item)
		}
	}
	return nil
}

// nonNil keeps an empty list a JSON [] rather than null.
func nonNil(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}
