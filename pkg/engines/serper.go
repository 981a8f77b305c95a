package engines

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Serper is the Serper Google search API (POST /search, key in the X-API-KEY header).
//
// Every query field is applied by Google: count as num, recency as tbs (qdr:d, qdr:w,
// qdr:m, qdr:y), language as hl, country as gl (lower-case), and the domain filters as
// site: operators in q, as for Brave (hits outside them are still dropped, with a
// warning). The answer box and the knowledge graph, when they link somewhere, become
// hits ahead of the organic results.
//
// Dates are Google's localised strings ("2 hours ago", "Mar 5, 2025", "2025年3月5日");
// those classicDate cannot read leave the hit undated.
//
// Pricing: Serper bills credits, one per search of up to 10 results and two above; the
// response's credits times $0.001 (the pay-as-you-go credit price). costPerSearchUSD,
// when configured, replaces the price of one credit.
type serper struct {
	client
}

func newSerper(cfg Config, hc *http.Client) (Engine, error) {
	e := &serper{client: newClient(cfg, hc, "https://google.serper.dev")}
	e.price = priceOf(cfg, 0.001) // one credit
	e.caps = Capabilities{Recency: true, Count: true, AllowedDomains: true, BlockedDomains: true, Language: true, Country: true}
	return e, nil
}

type serperRequest struct {
	Q   string `json:"q"`
	Num int    `json:"num"`
	GL  string `json:"gl,omitempty"`
	HL  string `json:"hl,omitempty"`
	TBS string `json:"tbs,omitempty"`
}

var serperTBS = map[Recency]string{OneDay: "qdr:d", OneWeek: "qdr:w", OneMonth: "qdr:m", OneYear: "qdr:y"}

type serperResponse struct {
	AnswerBox *struct {
		Title   string `json:"title"`
		Answer  string `json:"answer"`
		Snippet string `json:"snippet"`
		Link    string `json:"link"`
		Date    string `json:"date"`
	} `json:"answerBox"`
	KnowledgeGraph *struct {
		Title           string `json:"title"`
		Website         string `json:"website"`
		Description     string `json:"description"`
		DescriptionLink string `json:"descriptionLink"`
	} `json:"knowledgeGraph"`
	Organic []struct {
		Title   string `json:"title"`
		Link    string `json:"link"`
		Snippet string `json:"snippet"`
		Date    string `json:"date"`
	} `json:"organic"`
	Credits *float64 `json:"credits"`
}

func (e *serper) Search(ctx context.Context, q Query) (*Result, error) {
	req := serperRequest{
		Q:   siteQuery(q.Query, q.AllowedDomains, q.BlockedDomains),
		Num: cmp.Or(q.Count, DefaultCount),
		GL:  strings.ToLower(strings.TrimSpace(q.Country)),
		HL:  serperLang(q.Language),
		TBS: serperTBS[q.Recency],
	}
	return e.searchOnce(ctx, q, request{path: "/search", header: header("X-API-KEY", e.key), body: req, classify: serperClassify}, e.parse)
}

// serperLang maps a BCP 47 tag to Google's hl: lower-case, with Chinese scripts as the
// regions Google names them by ("zh-Hans" → "zh-cn", "zh-Hant" → "zh-tw").
func serperLang(tag string) string {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(tag), "_", "-"))
	switch {
	case t == "zh" || strings.HasPrefix(t, "zh-hans"):
		return "zh-cn"
	case strings.HasPrefix(t, "zh-hant"):
		return "zh-tw"
	}
	return t
}

// serperClassify reclassifies Serper's 400 "Not enough credits" as Quota.
func serperClassify(e *Error) {
	if strings.Contains(strings.ToLower(e.Message), "not enough credits") {
		e.Kind, e.RetryAfter = Quota, 0
	}
}

func (e *serper) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp serperResponse
	if err := decodeClassic(&e.client, bodies, &resp); err != nil {
		return nil, err
	}
	credits := 1.0
	if q.Count > 10 {
		credits = 2
	}
	if resp.Credits != nil && *resp.Credits >= 0 {
		credits = *resp.Credits
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: credits * e.price}}
	now := time.Now()
	seen := make(map[string]bool, len(resp.Organic)+2)
	add := func(h Hit) {
		u, ok := CleanURL(h.URL)
		if ok && seen[u] {
			return
		}
		seen[u] = true
		h.Snippet = clipSnippet(h.Snippet)
		res.Hits = append(res.Hits, h)
	}
	if ab := resp.AnswerBox; ab != nil && ab.Link != "" {
		add(Hit{
			Title:     oneLine(ab.Title),
			URL:       ab.Link,
			Snippet:   strings.Join(slices.DeleteFunc([]string{oneLine(ab.Answer), oneLine(ab.Snippet)}, func(s string) bool { return s == "" }), " — "),
			Published: readDate(ab.Date, now),
		})
	}
	if kg := resp.KnowledgeGraph; kg != nil {
		u := kg.Website
		if kg.Description != "" && kg.DescriptionLink != "" {
			u = kg.DescriptionLink
		}
		if u != "" {
			add(Hit{Title: oneLine(kg.Title), URL: u, Snippet: oneLine(kg.Description)})
		}
	}
	for _, r := range resp.Organic {
		add(Hit{Title: oneLine(r.Title), URL: r.Link, Snippet: oneLine(r.Snippet), Published: readDate(r.Date, now)})
	}
	return res, nil
}
