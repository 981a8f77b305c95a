package engines_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

const serperSearch = "serper/docs-shape-search.CONSTRUCTED.json"

func serperQueryOf(_ *http.Request, body []byte) string {
	var v struct{ Q string }
	json.Unmarshal(body, &v)
	return v.Q
}

func TestSerperConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "serper"},
		OK:     []enginetest.Response{enginetest.JSON(serperSearch)},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 5 {
				t.Fatalf("hits = %d, want 5", len(r.Hits))
			}
			if h := r.Hits[0]; h.Title != "Apple Inc. / Stock price" || h.URL != "https://www.google.com/finance/quote/AAPL:NASDAQ" {
				t.Errorf("hit 1 (answer box) = %q %q", h.Title, h.URL)
			}
			if !strings.Contains(r.Citation.LLMContent, "[3] Apple (https://www.apple.com/)") {
				t.Errorf("LLMContent lacks numbered source 3:\n%s", r.Citation.LLMContent)
			}
			if r.Usage.CostUSD != 0.001 {
				t.Errorf("cost = %v, want 1 credit", r.Usage.CostUSD)
			}
			if len(r.Warnings) != 0 {
				t.Errorf("warnings = %v", r.Warnings)
			}
		},
		Empty:       []enginetest.Response{{Body: []byte(`{"searchParameters":{"q":"zzqx","type":"search","engine":"google"},"organic":[],"credits":1}`)}},
		RateLimited: enginetest.Status(429, "serper/docs-shape-429-too-many-requests.CONSTRUCTED.json"),
		ServerError: enginetest.Status(500, `{"message":"Internal server error","statusCode":500}`),
		AuthError:   enginetest.Status(403, "serper/docs-shape-403-unauthorized.CONSTRUCTED.json"),
		QueryOf:     serperQueryOf,
		KeyOf:       func(r *http.Request) string { return r.Header.Get("X-API-KEY") },
	})
}

// The answer box and the knowledge graph come first; an organic result repeating the
// knowledge graph's link is merged; localised dates are read.
func TestSerperSearchFixture(t *testing.T) {
	t.Parallel()
	before := time.Now()
	res, err := engines.Normalize(engines.Config{Kind: "serper"}, engines.Query{Query: "apple inc"}, fixtures.Read(serperSearch))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	want := []struct {
		title, url, snippet string
		published           time.Time
	}{
		{"Apple Inc. / Stock price", "https://www.google.com/finance/quote/AAPL:NASDAQ",
			"AAPL: 227.63 USD −1.24 (−0.54%) — Apple Inc. (AAPL) stock price, closing price on Mar 5, 2025.", time.Date(2025, 3, 5, 0, 0, 0, 0, time.UTC)},
		{"Apple", "https://en.wikipedia.org/wiki/Apple_Inc.",
			"Apple Inc. is an American multinational technology company headquartered in Cupertino, California.", time.Time{}},
		{"Apple", "https://www.apple.com/",
			"Discover the innovative world of Apple and shop everything iPhone, iPad, Apple Watch, Mac, and Apple TV, plus explore accessories, entertainment, ...", time.Time{}},
		{"Apple reports first quarter results", "https://www.apple.com/newsroom/2025/01/apple-reports-first-quarter-results/",
			"Apple today announced financial results for its fiscal 2025 first quarter ended December 28, 2024.", time.Date(2025, 1, 30, 0, 0, 0, 0, time.UTC)},
		{"Apple shares slip as iPhone sales in China weaken", "https://www.reuters.com/technology/apple-shares-slip-2025-03-05/",
			"Shares of Apple fell on Wednesday after data showed iPhone shipments in China dropped for a second month.", time.Time{}},
		{"苹果公司 - 维基百科，自由的百科全书 🍎", "https://zh.wikipedia.org/zh-cn/%E8%8B%B9%E6%9E%9C%E5%85%AC%E5%8F%B8", "", time.Date(2025, 3, 5, 0, 0, 0, 0, time.UTC)},
		{"Apple Inc. (AAPL) Stock Price, News, Quote & History", "https://finance.yahoo.com/quote/AAPL/",
			"Find the latest Apple Inc. (AAPL) stock quote, history, news and other vital information to help you with your stock trading and investing.", time.Time{}},
		{"Apple Inc. | History, Products, Headquarters, & Facts | Britannica Money", "https://www.britannica.com/money/Apple-Inc",
			"American manufacturer of personal computers, smartphones, and tablet computers.", time.Date(2025, 2, 14, 0, 0, 0, 0, time.UTC)},
	}
	if len(res.Hits) != len(want) {
		t.Fatalf("hits = %d, want %d: %+v", len(res.Hits), len(want), res.Hits)
	}
	for i, w := range want {
		h := res.Hits[i]
		if h.Title != w.title || h.URL != w.url {
			t.Errorf("hit %d = %q %q, want %q %q", i+1, h.Title, h.URL, w.title, w.url)
		}
		if w.snippet != "" && h.Snippet != w.snippet {
			t.Errorf("hit %d snippet = %q\nwant %q", i+1, h.Snippet, w.snippet)
		}
		if i != 4 && i != 6 && !h.Published.Equal(w.published) {
			t.Errorf("hit %d published = %v, want %v", i+1, h.Published, w.published)
		}
	}
	for _, rel := range []struct {
		i   int
		ago time.Duration
	}{{4, 2 * time.Hour}, {6, 72 * time.Hour}} {
		if got := res.Hits[rel.i].Published; got.Before(before.Add(-rel.ago-time.Second)) || got.After(time.Now().Add(-rel.ago+time.Second)) {
			t.Errorf("hit %d published %v, want %s ago", rel.i+1, got, rel.ago)
		}
	}
	if res.Usage.CostUSD != 0.001 {
		t.Errorf("cost = %v", res.Usage.CostUSD)
	}
}

// Cost is the response's credits times the credit price; without credits, the credits
// Serper bills for the count asked.
func TestSerperCredits(t *testing.T) {
	t.Parallel()
	two := []byte(`{"organic":[{"title":"A","link":"https://a.example/","position":1}],"credits":2}`)
	none := []byte(`{"organic":[{"title":"A","link":"https://a.example/","position":1}]}`)
	price := 0.0005
	for _, tc := range []struct {
		cfg   engines.Config
		count int
		body  []byte
		want  float64
	}{
		{engines.Config{Kind: "serper"}, 20, two, 0.002},
		{engines.Config{Kind: "serper", CostPerSearchUSD: &price}, 20, two, 0.001},
		{engines.Config{Kind: "serper"}, 20, none, 0.002},
		{engines.Config{Kind: "serper"}, 10, none, 0.001},
	} {
		res, err := engines.Normalize(tc.cfg, engines.Query{Query: "a", Count: tc.count}, tc.body)
		if err != nil || res.Usage.CostUSD != tc.want {
			t.Errorf("count %d %s: cost = %v, want %v (err %v)", tc.count, tc.body, res.Usage.CostUSD, tc.want, err)
		}
	}
}

func TestSerperUnicode(t *testing.T) {
	t.Parallel()
	res, _ := enginetest.Search(t, engines.Config{Kind: "serper"}, engines.Query{Query: "苹果公司 🍎"}, enginetest.JSON(serperSearch))
	var raw struct {
		Organic []struct{ Snippet string } `json:"organic"`
	}
	if err := json.Unmarshal(fixtures.Read(serperSearch), &raw); err != nil {
		t.Fatal(err)
	}
	h := res.Hits[5]
	if h.Title != "苹果公司 - 维基百科，自由的百科全书 🍎" {
		t.Errorf("title = %q", h.Title)
	}
	classicCheckClipped(t, res, h, raw.Organic[4].Snippet)
}

func TestSerperErrors(t *testing.T) {
	t.Parallel()
	q := engines.Query{Query: "apple inc"}
	for _, tc := range []struct {
		resp enginetest.Response
		kind engines.ErrorKind
		msg  string
	}{
		{enginetest.Status(403, "serper/docs-shape-403-unauthorized.CONSTRUCTED.json"), engines.Auth, "Unauthorized."},
		{enginetest.Status(400, "serper/docs-shape-400-not-enough-credits.CONSTRUCTED.json"), engines.Quota, "Not enough credits"},
		{enginetest.Status(429, "serper/docs-shape-429-too-many-requests.CONSTRUCTED.json"), engines.RateLimited, "Too many requests"},
		{enginetest.Status(400, `{"message":"Query too long","statusCode":400}`), engines.BadRequest, "Query too long"},
	} {
		_, err, _ := enginetest.Do(t, engines.Config{Kind: "serper"}, q, tc.resp)
		if e := classicWantError(t, err, tc.kind, tc.msg); e.Status != tc.resp.Status {
			t.Errorf("status = %d, want %d", e.Status, tc.resp.Status)
		}
	}
}

// Every filter goes to Google: domains as site: operators in q, recency as tbs, count
// as num, language as hl, country as gl; hits outside the domains are dropped here.
func TestSerperFiltersOnTheWire(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "serper"}, engines.Query{
		Query:          "apple inc",
		Recency:        engines.OneDay,
		Count:          20,
		AllowedDomains: []string{"apple.com"},
		BlockedDomains: []string{"reuters.com"},
		Language:       "zh-Hans",
		Country:        "CN",
	}, enginetest.JSON(serperSearch))
	if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/search" || reqs[0].Header.Get("X-API-KEY") != "sk-test-key" {
		t.Fatalf("requests = %+v", reqs)
	}
	if got, want := string(reqs[0].Body), `{"q":"apple inc site:apple.com -site:reuters.com","num":20,"gl":"cn","hl":"zh-cn","tbs":"qdr:d"}`; got != want {
		t.Errorf("body = %s\nwant   %s", got, want)
	}
	if len(res.Hits) != 2 || res.Hits[0].URL != "https://www.apple.com/" || !strings.HasPrefix(res.Hits[1].URL, "https://www.apple.com/newsroom/") {
		t.Errorf("hits = %+v", res.Hits)
	}
	classicWantWarning(t, res, "6 hit(s) outside the domain filters")

	_, reqs = enginetest.Search(t, engines.Config{Kind: "serper"}, engines.Query{Query: "apple inc"}, enginetest.JSON(serperSearch))
	if got, want := string(reqs[0].Body), `{"q":"apple inc","num":10}`; got != want {
		t.Errorf("default body = %s, want %s", got, want)
	}
}

// The localised and relative dates Google shows, as Serper passes them on.
func TestSerperDates(t *testing.T) {
	t.Parallel()
	dates := []string{"5 mins ago", "1 week ago", "an hour ago", "3 天前", "2 小时前", "yesterday", "5 Mar 2025", "March 5, 2025", "2025/03/05", "2025-03-05T10:00:00Z", "sometime", ""}
	var organic []string
	for i, d := range dates {
		organic = append(organic, fmt.Sprintf(`{"title":"r%d","link":"https://r%d.example/","date":%q,"position":%d}`, i, i, d, i+1))
	}
	body := []byte(`{"organic":[` + strings.Join(organic, ",") + `],"credits":2}`)
	before := time.Now()
	res, err := engines.Normalize(engines.Config{Kind: "serper"}, engines.Query{Query: "dates", Count: 20}, body)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	march5 := time.Date(2025, 3, 5, 0, 0, 0, 0, time.UTC)
	for i, want := range []any{5 * time.Minute, 7 * 24 * time.Hour, time.Hour, 72 * time.Hour, 2 * time.Hour, 24 * time.Hour,
		march5, march5, march5, march5.Add(10 * time.Hour), time.Time{}, time.Time{}} {
		got := res.Hits[i].Published
		switch w := want.(type) {
		case time.Duration:
			if got.Before(before.Add(-w-time.Second)) || got.After(after.Add(-w+time.Second)) {
				t.Errorf("%q: published %v, want %s ago", dates[i], got, w)
			}
		case time.Time:
			if !got.Equal(w) {
				t.Errorf("%q: published %v, want %v", dates[i], got, w)
			}
		}
	}
}
