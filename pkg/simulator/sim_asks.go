package simulator

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// The ask readers turn an engine kind's request into a searchAsk: the query the route
// already read (queryOf) and the count, domain filters and recency the kind's request
// carries, where the kind carries them.

// jpath walks a decoded JSON value by object keys and array indexes ("0").
func jpath(v any, path ...string) any {
	for _, p := range path {
		switch t := v.(type) {
		case map[string]any:
			v = t[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

func jstr(v any) string { s, _ := v.(string); return s }
func jint(v any) int    { f, _ := v.(float64); return int(f) }

func jstrs(v any) []string {
	var out []string
	for _, x := range arr(v) {
		if s, ok := x.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

func decodeBody(body []byte) map[string]any {
	var m map[string]any
	json.Unmarshal(body, &m)
	return m
}

// commaList splits Zhipu's comma- or pipe-separated domain filter.
func commaList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '|' || r == ' ' })
}

func braveAsk(r *http.Request, _ []byte, q string) searchAsk {
	n, _ := strconv.Atoi(r.URL.Query().Get("count"))
	return newAsk(q, n, nil, nil, recencyOf(r.URL.Query().Get("freshness")))
}

func searxngAsk(r *http.Request, _ []byte, q string) searchAsk {
	return newAsk(q, 0, nil, nil, recencyOf(r.URL.Query().Get("time_range")))
}

// bodyAsk returns the ask reader of a kind whose JSON body carries the count, the
// allowed and blocked domains (string lists) and the recency at these dotted paths
// ("" for none), the recency read by recency.
func bodyAsk(count, allow, block, rec string, recency func(string) string) func(*http.Request, []byte, string) searchAsk {
	return func(_ *http.Request, body []byte, q string) searchAsk {
		m := decodeBody(body)
		at := func(path string) any {
			if path == "" {
				return nil
			}
			return jpath(m, strings.Split(path, ".")...)
		}
		return newAsk(q, jint(at(count)), jstrs(at(allow)), jstrs(at(block)), recency(jstr(at(rec))))
	}
}

// recencySince returns a reader of a time written in layout ("" when there is none)
// as the recency window that reaches back to it.
func recencySince(layout string) func(string) string {
	return func(s string) string {
		t, err := time.Parse(layout, s)
		if err != nil {
			return ""
		}
		return recencyOfAge(time.Since(t))
	}
}

// recencyOfAge is the recency window that reaches back age.
func recencyOfAge(age time.Duration) string {
	switch {
	case age <= 2*24*time.Hour:
		return "day"
	case age <= 8*24*time.Hour:
		return "week"
	case age <= 32*24*time.Hour:
		return "month"
	}
	return "year"
}

// serperRecency reads Serper's tbs ("qdr:w,sbd:1").
func serperRecency(tbs string) string {
	tbs, _, _ = strings.Cut(tbs, ",")
	return recencyOf(tbs)
}

func glmAPIAsk(_ *http.Request, body []byte, q string) searchAsk {
	m := decodeBody(body)
	return newAsk(q, jint(m["count"]), commaList(jstr(m["search_domain_filter"])), nil, recencyOf(jstr(m["search_recency_filter"])))
}

// glmSearchAsk is the search of GLM's web_search tool ws (its decoded options) for q.
func glmSearchAsk(ws any, q string) searchAsk {
	return newAsk(q, jint(jpath(ws, "count")), commaList(jstr(jpath(ws, "search_domain_filter"))), nil, recencyOf(jstr(jpath(ws, "search_recency_filter"))))
}

func openaiAsk(_ *http.Request, body []byte, q string) searchAsk {
	var allow []string
	for _, t := range arr(decodeBody(body)["tools"]) {
		allow = append(allow, jstrs(jpath(t, "filters", "allowed_domains"))...)
	}
	return newAsk(q, 0, allow, nil, "")
}

func anthropicAsk(_ *http.Request, body []byte, q string) searchAsk {
	var allow, block []string
	for _, t := range arr(decodeBody(body)["tools"]) {
		allow = append(allow, jstrs(jpath(t, "allowed_domains"))...)
		block = append(block, jstrs(jpath(t, "blocked_domains"))...)
	}
	return newAsk(q, 0, allow, block, "")
}

// perplexityAsk reads an Agent API request (its web_search tool's filters) or a
// Search API request (the same filters at the top level).
func perplexityAsk(_ *http.Request, body []byte, q string) searchAsk {
	m := decodeBody(body)
	f := m
	for _, t := range arr(m["tools"]) {
		if jstr(jpath(t, "type")) == "web_search" {
			f = obj(jpath(t, "filters"))
		}
	}
	var allow, block []string
	for _, d := range jstrs(f["search_domain_filter"]) {
		if b, ok := strings.CutPrefix(d, "-"); ok {
			block = append(block, b)
		} else {
			allow = append(allow, d)
		}
	}
	return newAsk(q, jint(m["max_results"]), allow, block, recencyOf(jstr(f["search_recency_filter"])))
}

func openrouterAsk(_ *http.Request, body []byte, q string) searchAsk {
	m := decodeBody(body)
	var n int
	var allow, block []string
	for _, t := range arr(m["tools"]) {
		p := jpath(t, "parameters")
		n = max(n, jint(jpath(p, "max_results")))
		allow = append(allow, jstrs(jpath(p, "allowed_domains"))...)
		block = append(block, jstrs(jpath(p, "excluded_domains"))...)
	}
	for _, p := range arr(m["plugins"]) {
		n = max(n, jint(jpath(p, "max_results")))
		allow = append(allow, jstrs(jpath(p, "include_domains"))...)
		block = append(block, jstrs(jpath(p, "exclude_domains"))...)
	}
	return newAsk(q, n, allow, block, "")
}

// plainAsk is the ask of a kind whose request carries nothing but the query.
func plainAsk(_ *http.Request, _ []byte, q string) searchAsk { return newAsk(q, 0, nil, nil, "") }

// jsonField returns a queryOf that reads a top-level string field of a JSON body.
func jsonField(name string) func(*http.Request, []byte) string {
	return func(_ *http.Request, body []byte) string { return jstr(decodeBody(body)[name]) }
}

// urlParam returns a queryOf that reads a URL query parameter.
func urlParam(name string) func(*http.Request, []byte) string {
	return func(r *http.Request, _ []byte) string { return r.URL.Query().Get(name) }
}

// bodyMessages are the messages of a Chat or Messages request body; nil when it does
// not decode.
func bodyMessages(body []byte) []llm.Message {
	var req struct {
		Messages []llm.Message `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	return req.Messages
}

// lastUser is the text of the last user message of msgs (Chat and Anthropic messages,
// Responses input items; string content or text parts).
func lastUser(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return llm.Text(msgs[i].Content)
		}
	}
	return ""
}

// chatQuery is a queryOf that reads the text of the last user message of an
// OpenAI-style chat request body.
func chatQuery(_ *http.Request, body []byte) string { return lastUser(bodyMessages(body)) }

// responsesInput is the text of a Responses input: a string, or the last user message
// (string content or input_text parts).
func responsesInput(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []llm.Message
	if json.Unmarshal(raw, &items) != nil {
		return ""
	}
	return lastUser(items)
}
