package engines_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// glmErrorFixture returns one body of zhipu/errors-from-tests.NOT-RECORDED.json.
func glmErrorFixture(t testing.TB, name string) []byte {
	t.Helper()
	var all map[string]json.RawMessage
	if err := json.Unmarshal(fixtures.Read("zhipu/errors-from-tests.NOT-RECORDED.json"), &all); err != nil {
		t.Fatal(err)
	}
	b, ok := all[name]
	if !ok {
		t.Fatalf("no %q in the Zhipu error fixture", name)
	}
	return b
}

// glmLastUser returns the content of the last user message of a chat request body.
func glmLastUser(_ *http.Request, body []byte) string {
	var v struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &v)
	for i := len(v.Messages) - 1; i >= 0; i-- {
		if v.Messages[i].Role == "user" {
			return v.Messages[i].Content
		}
	}
	return ""
}

func glmBearerKey(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func glmNear(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestGLMChatConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "glm-chat"},
		OK:     []enginetest.Response{enginetest.JSON("zhipu/docs-en-chat-web-search-with-web_search-field.TRIMMED.response.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 2 || len(r.Citation.Sources) != 2 {
				t.Fatalf("hits = %d, sources = %d, want 2 and 2", len(r.Hits), len(r.Citation.Sources))
			}
			h := r.Hits[0]
			if h.Title != "April 23 Financial Highlights: Analyzing Major Global Market Events and New Data Trends" {
				t.Errorf("title = %q (the (Published: …) suffix must go)", h.Title)
			}
			if want := time.Date(2025, 4, 22, 23, 7, 0, 0, time.UTC); !h.Published.Equal(want) {
				t.Errorf("published = %v, want %v (07:07 Beijing time)", h.Published, want)
			}
			if h.URL != "https://www.sohu.com/a/887836650_121956424" || h.Source != "Sohu" {
				t.Errorf("hit 1 = %q from %q", h.URL, h.Source)
			}
			if !strings.HasPrefix(h.Snippet, "In the current volatile global economic climate") {
				t.Errorf("snippet = %q", h.Snippet)
			}
			enginetest.MarkerAfter(t, r.Summary, "affecting oil price fluctuations. ", "[1]")
			enginetest.MarkerAfter(t, r.Summary, "At 07:10. ... ", "[2]")
			if strings.Contains(r.Summary, "ref_") {
				t.Errorf("ref markers left in the summary: %q", r.Summary)
			}
			if s := r.Citation.Sources[1].Web; s.URI != "https://www.sohu.com/a/884753377_122066678" || !strings.HasPrefix(s.Title, "April 16 Financial Events") {
				t.Errorf("source 2 = %+v", s)
			}
			if r.Usage.InputTokens != 4199 || r.Usage.OutputTokens != 868 || r.Usage.Searches != 1 {
				t.Errorf("usage = %+v", r.Usage)
			}
			if !glmNear(r.Usage.CostUSD, 0.03*0.14) {
				t.Errorf("cost = %v, want search_pro ¥0.03 at 0.14", r.Usage.CostUSD)
			}
		},
		Unicode: []enginetest.Response{enginetest.JSON("zhipu/glm-chat-finance-zh.CONSTRUCTED.json")},
		CheckUnicode: func(t *testing.T, r *engines.Result) {
			enginetest.MarkerAfter(t, r.Summary, "对全球经济政策协调和金融市场情绪产生深远影响。", "[1]")
			enginetest.MarkerAfter(t, r.Summary, "为投资者提供关键洞察。", "[1]")
			if strings.Contains(r.Summary, "来源") {
				t.Errorf("[来源：ref_1] not replaced: %q", r.Summary)
			}
			// The third item has an empty link: dropped from hits and sources.
			if len(r.Hits) != 2 || len(r.Citation.Sources) != 2 {
				t.Fatalf("hits = %d, sources = %d, want 2 and 2", len(r.Hits), len(r.Citation.Sources))
			}
			if r.Hits[1].Title != "4月16日财经事件与经济数据：全球市场关注要点" || r.Hits[1].Source != "搜狐" {
				t.Errorf("hit 2 = %q from %q", r.Hits[1].Title, r.Hits[1].Source)
			}
			if !strings.Contains(strings.Join(r.Warnings, "\n"), "1 hit(s) without an absolute http(s) URL were dropped") {
				t.Errorf("warnings = %q", r.Warnings)
			}
		},
		Empty:       []enginetest.Response{{Body: []byte(`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"没有找到相关的搜索结果。","role":"assistant"}}],"created":1748311718,"id":"20250527100811da2f8f7243f94b02","model":"glm-4.7","request_id":"20250527100811da2f8f7243f94b02","usage":{"completion_tokens":9,"prompt_tokens":120,"total_tokens":129},"web_search":[]}`)}},
		RateLimited: enginetest.Response{Status: 429, Body: glmErrorFixture(t, "rate_limit_429")},
		QueryOf:     glmLastUser,
		KeyOf:       glmBearerKey,
	})
}

// The Chinese docs example omits the web_search array: its [来源：ref_1] markers
// number nothing and must disappear rather than dangle.
func TestGLMChatDocsExampleWithoutResults(t *testing.T) {
	t.Parallel()
	res, err := engines.Normalize(engines.Config{Kind: "glm-chat"}, engines.Query{Query: "2025年4月的重要财经事件、政策变化和市场数据"},
		fixtures.Read("zhipu/docs-chat-web-search.response.json"))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	if len(res.Hits) != 0 || len(res.Citation.Sources) != 0 {
		t.Errorf("hits = %d, sources = %d, want none", len(res.Hits), len(res.Citation.Sources))
	}
	if strings.Contains(res.Summary, "ref_") || strings.Contains(res.Summary, "[1]") {
		t.Errorf("summary keeps markers: %q", res.Summary)
	}
	if !strings.HasPrefix(res.Summary, "根据您提供的文档，以下是2025年4月的重要财经事件") || !strings.HasSuffix(res.Summary, "为投资者提供关键洞察。") {
		t.Errorf("summary = %q", res.Summary)
	}
	if res.Usage.InputTokens != 4199 || res.Usage.OutputTokens != 868 {
		t.Errorf("usage = %+v", res.Usage)
	}
}

// The docs request: our request carries the same tool shape (booleans and numbers
// where the docs wrote "True" and "5").
func TestGLMChatRequestShape(t *testing.T) {
	t.Parallel()
	var rec struct {
		Model    string `json:"model"`
		Messages []struct {
			Role, Content string
		} `json:"messages"`
		Tools []struct {
			Type      string         `json:"type"`
			WebSearch map[string]any `json:"web_search"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(fixtures.Read("zhipu/docs-chat-web-search.request.json"), &rec); err != nil {
		t.Fatal(err)
	}
	ws := rec.Tools[0].WebSearch
	opts, _ := json.Marshal(map[string]string{"searchEngine": ws["search_engine"].(string), "contentSize": ws["content_size"].(string), "searchPrompt": ws["search_prompt"].(string)})
	cfg := engines.Config{Kind: "glm-chat", Model: rec.Model, Options: opts}
	q := engines.Query{Query: rec.Messages[0].Content, Count: 5, AllowedDomains: []string{ws["search_domain_filter"].(string)}}
	_, reqs := enginetest.Search(t, cfg, q, enginetest.JSON("zhipu/glm-chat-finance-zh.CONSTRUCTED.json"))
	if len(reqs) != 1 || reqs[0].Path != "/chat/completions" || reqs[0].Method != http.MethodPost {
		t.Fatalf("requests = %+v", reqs)
	}
	var sent struct {
		Model    string `json:"model"`
		Messages []struct {
			Role, Content string
		} `json:"messages"`
		Stream bool `json:"stream"`
		Tools  []struct {
			Type      string         `json:"type"`
			WebSearch map[string]any `json:"web_search"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Model != rec.Model || len(sent.Messages) != 1 || sent.Messages[0] != rec.Messages[0] || sent.Stream {
		t.Errorf("model/messages = %q %+v", sent.Model, sent.Messages)
	}
	if len(sent.Tools) != 1 || sent.Tools[0].Type != "web_search" {
		t.Fatalf("tools = %+v", sent.Tools)
	}
	got := sent.Tools[0].WebSearch
	for k, v := range ws {
		want := v
		switch v {
		case "True":
			want = true
		case "5":
			want = 5.0
		}
		if k == "search_domain_filter" {
			want = "sohu.com" // the query's domains are normalized without "www."
		}
		if got[k] != want {
			t.Errorf("web_search.%s = %#v, want %#v", k, got[k], want)
		}
	}
	if got["search_query"] != rec.Messages[0].Content {
		t.Errorf("search_query = %#v", got["search_query"])
	}
}

// Two allowed domains: the first is sent, the answer is held to both, and the
// caller is told the second was not searched.
func TestGLMChatSeveralAllowedDomains(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "glm-chat"},
		engines.Query{Query: "财经", AllowedDomains: []string{"sina.com.cn", "sohu.com"}, Recency: engines.OneWeek},
		enginetest.JSON("zhipu/glm-chat-finance-zh.CONSTRUCTED.json"))
	var sent struct {
		Tools []struct {
			WebSearch struct {
				SearchDomainFilter  string `json:"search_domain_filter"`
				SearchRecencyFilter string `json:"search_recency_filter"`
				Count               int    `json:"count"`
			} `json:"web_search"`
		} `json:"tools"`
	}
	json.Unmarshal(reqs[0].Body, &sent)
	if w := sent.Tools[0].WebSearch; w.SearchDomainFilter != "sina.com.cn" || w.SearchRecencyFilter != "oneWeek" || w.Count != 10 {
		t.Errorf("sent %+v", w)
	}
	if len(res.Hits) != 2 {
		t.Errorf("hits = %d, want the 2 sohu.com hits", len(res.Hits))
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "only sina.com.cn was searched, not sohu.com") {
		t.Errorf("warnings = %q", res.Warnings)
	}
}

// The ref markers are free text: every bracket style is read, unknown refs vanish,
// the model's own [n] markers go, and arbitrary text never breaks the parser. Pages
// are numbered by first citation, as for a GLM main model; the uncited follow.
func TestGLMChatRefMarkers(t *testing.T) {
	t.Parallel()
	items := `[{"title":"A","link":"https://a.example/1","refer":"ref_1"},{"title":"B","link":"https://b.example/2","refer":"ref_2"},{"title":"C","link":"https://c.example/3","refer":"ref_3"}]`
	for _, tc := range []struct{ in, want, first string }{
		{"One[ref_1] two[ref_2].", "One[1] two[2].", "a"},
		{"一【来源：ref_3】二[来源：ref_1]", "一[1]二[2]", "c"},
		{"x [Source: ref_2, ref_1] y", "x [1][2] y", "b"},
		{"x [Sources: ref_1][Source: ref_3]", "x [1][2]", "a"},
		{"unknown [ref_9] and （ref_2）", "unknown  and [1]", "b"},
		{"broken [ref_ and ref_1] [ref_12345678] 【", "broken [1]  【", "a"},
		{"no brackets ref_1, ref_2 stay", "no brackets ref_1, ref_2 stay", "a"},
		{"[[ref_1]]", "[[1]]", "a"},
		{"own [2] marker[ref_3]", "own  marker[1]", "c"},
	} {
		body := `{"choices":[{"finish_reason":"stop","message":{"content":` + strings.TrimSpace(glmJSON(tc.in)) + `}}],"web_search":` + items + `}`
		res, err := engines.Normalize(engines.Config{Kind: "glm-chat"}, engines.Query{Query: "q"}, []byte(body))
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		enginetest.CheckInvariants(t, res)
		if res.Summary != tc.want {
			t.Errorf("%q -> %q, want %q", tc.in, res.Summary, tc.want)
		}
		if len(res.Citation.Sources) != 3 || !strings.HasPrefix(res.Citation.Sources[0].Web.URI, "https://"+tc.first+".example/") {
			t.Errorf("%q: sources %+v, want %s.example first and all three", tc.in, res.Citation.Sources, tc.first)
		}
	}
}

// One numbering of GLM's refs: on the recorded answers (and one citing out of order),
// the glm-chat engine's markers and first sources are those of a GLM main model's
// answer (wire.GLMModel), the uncited results after them.
func TestGLMChatNumbersRefsAsMainModel(t *testing.T) {
	t.Parallel()
	outOfOrder := `{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"C says so【来源：ref_3】, A too[ref_1]."}}],` +
		`"web_search":[{"title":"A","link":"https://a.example/1","refer":"ref_1"},{"title":"B","link":"https://b.example/2","refer":"ref_2"},{"title":"C","link":"https://c.example/3","refer":"ref_3"}]}`
	markers := regexp.MustCompile(`\[[0-9]+\]`)
	for name, body := range map[string][]byte{
		"docs-en":    fixtures.Read("zhipu/docs-en-chat-web-search-with-web_search-field.TRIMMED.response.json"),
		"finance-zh": fixtures.Read("zhipu/glm-chat-finance-zh.CONSTRUCTED.json"),
		"outOfOrder": []byte(outOfOrder),
	} {
		res, err := engines.Normalize(engines.Config{Kind: "glm-chat"}, engines.Query{Query: "q"}, body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}))
		defer srv.Close()
		main := upstream.New(openaichat.GLM, "glm", srv.URL, "k", srv.Client(), upstream.Options{})
		answer, err := main.Answer(context.Background(), &wire.Request{Model: "glm-4.7", Search: &llm.SearchOptions{Requested: true},
			Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "q"}}}}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text, cited := answer.MarkedText()
		if len(cited) == 0 {
			t.Fatalf("%s: the main model's answer cites nothing: %q", name, text)
		}
		if got, want := markers.FindAllString(res.Summary, -1), markers.FindAllString(text, -1); !slices.Equal(got, want) {
			t.Errorf("%s: engine markers %q, main model's %q", name, got, want)
		}
		for i, s := range cited {
			if i >= len(res.Citation.Sources) || res.Citation.Sources[i].Web.URI != s.URL {
				t.Errorf("%s: source %d = %+v, main model's %s", name, i+1, res.Citation.Sources, s.URL)
			}
		}
	}
}

func glmJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// zhipu/errors-from-tests.NOT-RECORDED.json: 1301 (content filter) is a bad request,
// 1302 a rate limit, 1113 (no balance, on a 429) a quota error, whether the envelope
// comes with its HTTP status or inside a 200.
func TestGLMErrorClassification(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		want   engines.ErrorKind
	}{
		{"content_filter_400", 400, engines.BadRequest},
		{"rate_limit_429", 429, engines.RateLimited},
		{"insufficient_balance_429", 429, engines.Quota},
	}
	for _, kind := range []string{"glm-chat", "glm-api"} {
		for _, tc := range cases {
			for _, status := range []int{tc.status, 200} {
				body := glmErrorFixture(t, tc.name)
				_, err, _ := enginetest.Do(t, engines.Config{Kind: kind}, engines.Query{Query: "千问"}, enginetest.Response{Status: status, Body: body})
				var e *engines.Error
				if !errors.As(err, &e) {
					t.Fatalf("%s %s/%d: err = %v", kind, tc.name, status, err)
				}
				if e.Kind != tc.want {
					t.Errorf("%s %s/%d: kind = %s, want %s (%v)", kind, tc.name, status, e.Kind, tc.want, e)
				}
				var env struct {
					Error struct{ Code, Message string }
				}
				json.Unmarshal(body, &env)
				if !strings.Contains(e.Message, env.Error.Message) || !strings.Contains(e.Message, env.Error.Code) {
					t.Errorf("%s %s/%d: message %q lacks the provider's code and text", kind, tc.name, status, e.Message)
				}
			}
		}
	}
}
