package engines

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Brave is the Brave Search web search API (GET /res/v1/web/search, key in the
// X-Subscription-Token header).
//
// Every query field is applied by Brave: recency as freshness (pd, pw, pm, py), count
// (at most 20 per request, Brave's ceiling), language as search_lang, country, and the
// domain filters as site: operators in the query text, since Brave has no domain
// parameters ("(site:a OR site:b)" for allowed domains, "-site:c" for blocked ones).
// Hits outside the filters are still dropped, with a warning, should Brave ignore an
// operator.
//
// Only the web results are asked for (result_filter=web): they are all the fleet reads.
//
// Options: {"extraSnippets": true} asks Brave for its extra excerpts per result (plans
// that include them), used when a result has no description. Off by default, because
// plans without them gain nothing from the parameter.
//
// Pricing: the Search plan's $5 per 1,000 requests, so $0.005 per search by default.
//
// This file also holds the helpers every classic search API kind shares (brave,
// searxng, exa, serper): cleanHTML, clipSnippet and siteQuery.
type brave struct {
	client
	opts braveOptions
}

type braveOptions struct {
	ExtraSnippets bool `json:"extraSnippets,omitempty"`
}

// braveMaxCount is the largest count Brave accepts in one request.
const braveMaxCount = 20

func newBrave(cfg Config, hc *http.Client) (Engine, error) {
	e := &brave{client: newClient(cfg, hc, "https://api.search.brave.com")}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	e.price = priceOf(cfg, 0.005)
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true, BlockedDomains: true, Language: true, Country: true}
	return e, nil
}

var braveFreshness = map[Recency]string{OneDay: "pd", OneWeek: "pw", OneMonth: "pm", OneYear: "py"}

type braveResponse struct {
	Web struct {
		Results []braveResult `json:"results"`
	} `json:"web"`
}

type braveResult struct {
	Title       string `json:"title"`
	URL         string `json:"url"`
	Description string `json:"description"`
	Age         string `json:"age"`
	PageAge     string `json:"page_age"`
	MetaURL     struct {
		Hostname string `json:"hostname"`
	} `json:"meta_url"`
	ExtraSnippets []string `json:"extra_snippets"`
}

func (e *brave) Search(ctx context.Context, q Query) (*Result, error) {
	v, _ := e.params(q)
	return e.searchOnce(ctx, q, request{method: http.MethodGet, path: "/res/v1/web/search?" + v.Encode(),
		header: header("X-Subscription-Token", e.key), classify: braveClassify}, e.parse)
}

// params builds the query string for q, and the warnings for the parts of q Brave
// cannot take as given (a count above its ceiling, a language or country it does not
// know).
func (e *brave) params(q Query) (url.Values, []string) {
	v := url.Values{}
	var warns []string
	v.Set("q", siteQuery(q.Query, q.AllowedDomains, q.BlockedDomains))
	count := cmp.Or(q.Count, DefaultCount)
	if count > braveMaxCount {
		warns = append(warns, fmt.Sprintf("Brave returns at most %d results per request; %d were asked for", braveMaxCount, count))
		count = braveMaxCount
	}
	v.Set("count", strconv.Itoa(count))
	// Only the web results, which is all parse reads: by default Brave adds every
	// other kind it has for the query (news, videos, discussions, FAQ, infobox,
	// locations), bytes to carry and to decode for nothing.
	v.Set("result_filter", "web")
	if f := braveFreshness[q.Recency]; f != "" {
		v.Set("freshness", f)
	}
	if q.Country != "" {
		if c, ok := braveCountry(q.Country); ok {
			v.Set("country", c)
		} else {
			warns = append(warns, fmt.Sprintf("country %q is not one Brave knows and was ignored", q.Country))
		}
	}
	if q.Language != "" {
		if l, ok := braveLang(q.Language); ok {
			v.Set("search_lang", l)
		} else {
			warns = append(warns, fmt.Sprintf("language %q is not one Brave knows and was ignored", q.Language))
		}
	}
	if e.opts.ExtraSnippets {
		v.Set("extra_snippets", "true")
	}
	return v, warns
}

// braveClassify reclassifies the failures whose HTTP status says less than Brave's
// error code: 422 SUBSCRIPTION_TOKEN_INVALID is a bad key (Auth, not BadRequest), 429
// QUOTA_LIMITED and 402 USAGE_LIMIT_EXCEEDED are spent quota, not a reason to retry. (A
// 429 without Retry-After waits for the first window of X-RateLimit-Reset: the
// provider layer's rule, provider.RetryAfter.)
//
// The code is read from the error's message, which http.go builds as "CODE: detail"
// from Brave's {"error":{"code","detail"}} envelope (or the body text otherwise).
func braveClassify(e *Error) {
	switch {
	case strings.Contains(e.Message, "SUBSCRIPTION_TOKEN_INVALID"):
		e.Kind = Auth
	case strings.Contains(e.Message, "USAGE_LIMIT_EXCEEDED"), strings.Contains(e.Message, "QUOTA_LIMITED"):
		e.Kind, e.RetryAfter = Quota, 0
	}
}

func (e *brave) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp braveResponse
	if err := decodeClassic(&e.client, bodies, &resp); err != nil {
		return nil, err
	}
	_, warns := e.params(q)
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}, Warnings: warns}
	now := time.Now()
	for _, r := range resp.Web.Results {
		h := Hit{
			Title:   cleanHTML(r.Title),
			URL:     r.URL,
			Source:  strings.TrimPrefix(strings.ToLower(r.MetaURL.Hostname), "www."),
			Snippet: cleanHTML(r.Description),
		}
		if h.Snippet == "" && len(r.ExtraSnippets) > 0 {
			h.Snippet = cleanHTML(strings.Join(r.ExtraSnippets, " … "))
		}
		h.Snippet = clipSnippet(h.Snippet)
		if h.Published = readDate(r.PageAge, now); h.Published.IsZero() {
			h.Published = readDate(r.Age, now)
		}
		res.Hits = append(res.Hits, h)
	}
	return res, nil
}

// braveLangs are the search_lang values Brave accepts (its documented list; note "jp"
// for Japanese and the script or region variants of Chinese, English and Portuguese).
var braveLangs = setOf("ar eu bn bg ca zh-hans zh-hant hr cs da nl en en-gb et fi fr gl de gu he hi hu is it jp kn " +
	"ko lv lt ms ml mr nb pl pt-br pt-pt pa ro ru sr sk sl es sv ta te th tr uk vi")

// braveLang maps a BCP 47 tag to Brave's search_lang.
func braveLang(tag string) (string, bool) {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(tag), "_", "-"))
	if braveLangs[t] {
		return t, true
	}
	primary, rest, _ := strings.Cut(t, "-")
	switch primary {
	case "zh":
		if strings.Contains(rest, "hant") || rest == "tw" || rest == "hk" || rest == "mo" {
			return "zh-hant", true
		}
		return "zh-hans", true
	case "ja":
		return "jp", true
	case "pt":
		if rest == "pt" {
			return "pt-pt", true
		}
		return "pt-br", true
	case "en":
		if rest == "gb" || rest == "uk" {
			return "en-gb", true
		}
		return "en", true
	case "no", "nn":
		return "nb", true
	case "iw":
		return "he", true
	}
	if braveLangs[primary] {
		return primary, true
	}
	return "", false
}

// braveCountries are the country codes Brave's country parameter accepts.
var braveCountries = setOf("AR AU AT BE BR CA CL DK FI FR DE HK IN ID IT JP KR MY MX NL NZ NO CN PL PT PH RU SA ZA ES SE CH TW TR GB US")

// setOf is the set of the space-separated words of s.
func setOf(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

func braveCountry(code string) (string, bool) {
	c := strings.ToUpper(strings.TrimSpace(code))
	if c == "UK" {
		c = "GB"
	}
	return c, braveCountries[c]
}

// siteQuery appends site: operators for the domain filters to q: "q site:a",
// "q (site:a OR site:b)", "q -site:c". Brave and Google (Serper) both read them.
func siteQuery(q string, allowed, blocked []string) string {
	sites := make([]string, len(allowed))
	for i, d := range allowed {
		sites[i] = "site:" + d
	}
	switch len(sites) {
	case 0:
	case 1:
		q += " " + sites[0]
	default:
		q += " (" + strings.Join(sites, " OR ") + ")"
	}
	for _, d := range blocked {
		q += " -site:" + d
	}
	return q
}

// cleanHTML turns a provider's HTML-flavoured text (Brave's <strong> highlights,
// entities such as &#x27;) into plain text on one line (PlainText). Entity-encoded
// markup is markup too: "types &lt;T any&gt; that" reads "types that".
func cleanHTML(s string) string {
	return strings.Join(strings.Fields(PlainText(s)), " ")
}

// clipSnippet cuts s to at most SnippetBudget bytes on a rune boundary, the cut marked
// with "…" inside the budget, so a hit's snippet is exactly what the model reads.
func clipSnippet(s string) string {
	const ellipsis = "…"
	if len(s) <= SnippetBudget {
		return s
	}
	n := SnippetBudget - len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.TrimRight(s[:n], " ") + ellipsis
}
