package nativechat

import (
	"bytes"
	"cmp"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Zhipu GLM's web_search tool (WIRE_FORMATS.md §4a, internal/fixtures/zhipu): the
// request declares {"type":"web_search","web_search":{"enable":true,
// "search_engine":…,"search_result":true}}; the model searches and answers in one
// call, the results in a top-level "web_search" array next to "choices" (on one chunk
// when streamed) with refer "ref_1"…, and the answer cites them with free-text
// markers that name a refer ("[ref_1]", "[来源：ref_1]", "[Source: ref_1]").

// GLMSearch are the settings of GLM's web_search tool (Zhipu's names in the comments).
type GLMSearch struct {
	Engine        string `json:"search_engine"`                   // search_std | search_pro | search_pro_sogou | search_pro_quark…
	Query         string `json:"search_query,omitempty"`          // what is searched (default: the model's choice)
	Prompt        string `json:"search_prompt,omitempty"`         // a template, "{search_result}" marks the results
	Count         int    `json:"count,omitempty"`                 // results per search
	DomainFilter  string `json:"search_domain_filter,omitempty"`  // one domain
	RecencyFilter string `json:"search_recency_filter,omitempty"` // oneDay | oneWeek | oneMonth | oneYear | noLimit
	ContentSize   string `json:"content_size,omitempty"`          // medium | high
}

// GLMTool declares GLM's search with s, the results returned (search_result, without
// which the web_search array is missing). The model callers and the glm-chat engine
// declare it here.
func GLMTool(s GLMSearch) json.RawMessage {
	ws, _ := json.Marshal(struct {
		Enable       bool `json:"enable"`
		SearchResult bool `json:"search_result"`
		GLMSearch
	}{true, true, s})
	b, _ := json.Marshal(map[string]json.RawMessage{"type": json.RawMessage(`"web_search"`), "web_search": ws})
	return b
}

// GLMItem is one search result of the web_search array (and of the Web Search API's
// search_result array).
type GLMItem struct {
	Title       string `json:"title"`
	Content     string `json:"content"`
	Link        string `json:"link"`
	Media       string `json:"media"`
	Icon        string `json:"icon"`
	Refer       string `json:"refer"`
	PublishDate string `json:"publish_date"`
}

// GLMResults reads the web_search array of a response body, whole or streamed (nil:
// the answer has none).
func GLMResults(body []byte) []GLMItem {
	var items []GLMItem
	read := func(data []byte) {
		var top struct {
			WebSearch []GLMItem `json:"web_search"`
		}
		if json.Unmarshal(data, &top) == nil && top.WebSearch != nil && items == nil {
			items = top.WebSearch
		}
	}
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '{' {
		read(b)
		return items
	}
	llm.ReadSSE(bytes.NewReader(body), func(_ string, data []byte) error {
		if bytes.Contains(data, []byte(`"web_search"`)) {
			read(data)
		}
		return nil
	})
	return items
}

// glmRefRE finds a bracketed citation that names one or more refers: "[ref_1]",
// "[来源：ref_1]", "[Source: ref_1, ref_2]", "【ref_3】". The model writes these freely,
// so anything short between the brackets is accepted.
var glmRefRE = regexp.MustCompile(`[\[【(（][^\[\]【】()（）\n]{0,40}?ref_[0-9]{1,4}[^\[\]【】()（）\n]{0,40}?[\]】)）]`)

var glmRefNumRE = regexp.MustCompile(`ref_[0-9]{1,4}`)

// glmPublishedRE matches the publication suffix Zhipu appends to titles: Chinese
// "（发布时间：2026-01-27 10:31:42）" and English "(Published: 2025-04-23 07:07:00)";
// submatches 1 and 2 are its day and time of day, where it gives them.
var glmPublishedRE = regexp.MustCompile(`\s*[（(]\s*(?:发布时间|Published)\s*[：:]\s*(?:([0-9]{4}-[0-9]{2}-[0-9]{2})(?:[ T]([0-9]{2}:[0-9]{2}(?::[0-9]{2})?))?)?[^（）()]*[）)]\s*$`)

// glmChinaTime is the zone of the suffix's wall-clock times (Zhipu is in Beijing).
var glmChinaTime = time.FixedZone("CST", 8*3600)

// GLMTitle splits the publication suffix off a search result's title (of the
// web_search array, and of the Web Search API) and returns the time it gives: zero
// when there is none or it does not parse.
func GLMTitle(title string) (string, time.Time) {
	m := glmPublishedRE.FindStringSubmatchIndex(title)
	if m == nil {
		return title, time.Time{}
	}
	var t time.Time
	if m[2] >= 0 {
		clock := "00:00:00"
		if m[4] >= 0 {
			clock = title[m[4]:m[5]]
			if len(clock) == 5 {
				clock += ":00"
			}
		}
		t, _ = time.ParseInLocation("2006-01-02 15:04:05", title[m[2]:m[3]]+" "+clock, glmChinaTime)
	}
	return strings.TrimSpace(title[:m[0]]), t
}

// GLMCite replaces each refer marker of text by the [n] markers of the pages it names,
// pages numbered by first citation (a refer with no result or no link is dropped), and
// removes the model's own [n] markers; it returns the text and the cited pages. It is
// the one numbering of GLM's refs, for main models and the glm-chat engine alike.
func GLMCite(text string, items []GLMItem) (string, []llm.NativeSource) {
	byRef := map[string]GLMItem{}
	for i, it := range items {
		ref := cmp.Or(it.Refer, "ref_"+strconv.Itoa(i+1)) // an item without refer is ref_<position>
		if _, dup := byRef[ref]; !dup {
			byRef[ref] = it
		}
	}
	sources := []llm.NativeSource{}
	num := map[string]int{}
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		prev := 0
		for _, m := range glmRefRE.FindAllStringIndex(line, -1) {
			b.WriteString(cleanLine(line[prev:m[0]]))
			prev = m[1]
			for _, ref := range glmRefNumRE.FindAllString(line[m[0]:m[1]], -1) {
				it, ok := byRef[ref]
				if !ok || it.Link == "" {
					continue
				}
				n, seen := num[it.Link]
				if !seen {
					title, _ := GLMTitle(it.Title)
					sources = append(sources, llm.NativeSource{URL: it.Link, Title: title})
					n = len(sources)
					num[it.Link] = n
				}
				b.WriteString("[" + strconv.Itoa(n) + "]")
			}
		}
		b.WriteString(cleanLine(line[prev:]))
	}
	return b.String(), sources
}
