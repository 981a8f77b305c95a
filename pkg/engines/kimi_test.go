package engines_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

const (
	kimiRound1 = "moonshot/hermoonshotes-round1-tool-calls.response.json"
	kimiRound2 = "moonshot/hermoonshotes-round2-final.response.json"
)

// kimiTurn answers the echo round once the request carries the tool message.
func kimiTurn(_ *http.Request, body []byte) int {
	if bytes.Contains(body, []byte(`"role":"tool"`)) {
		return 1
	}
	return 0
}

// checkKimiTranscript asserts the recorded final answer's sources and markers.
func checkKimiTranscript(t *testing.T, r *engines.Result) {
	t.Helper()
	if len(r.Citation.Sources) != 2 || len(r.Hits) != 2 {
		t.Fatalf("sources = %d, hits = %d, want 2 and 2", len(r.Citation.Sources), len(r.Hits))
	}
	s1, s2 := r.Citation.Sources[0].Web, r.Citation.Sources[1].Web
	if s1.URI != "https://www.yumiok.com/archives/6077.html" || s1.Title != "Kimi K2.6 Code Preview 正式发布：万亿参数编程大模型上线" {
		t.Errorf("source 1 = %+v", s1)
	}
	if s2.URI != "https://www.techritual.com/2026/04/14/507442/" || s2.Title != "Kimi K2.6-code-preview 低調發布：萬億參數編程大模型實測達 Sonnet 4.6 水平" {
		t.Errorf("source 2 = %+v", s2)
	}
	// The links stay, each followed by its marker.
	enginetest.MarkerAfter(t, r.Summary, "# [Kimi K2.6 Code Preview 正式发布：万亿参数编程大模型上线](https://www.yumiok.com/archives/6077.html)", "[1]\n\n> 月之暗面于2026年4月14日")
	enginetest.MarkerAfter(t, r.Summary, "萬億參數編程大模型實測達 Sonnet 4.6 水平](https://www.techritual.com/2026/04/14/507442/)", "[2]")
	if got := engines.Markers(r.Summary); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("markers = %v, want [1 2]", got)
	}
}

func TestKimiConformance(t *testing.T) {
	t.Parallel()
	transcript := []enginetest.Response{enginetest.JSON(kimiRound1), enginetest.JSON(kimiRound2)}
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "kimi"},
		OK:     transcript,
		Turn:   kimiTurn,
		CheckOK: func(t *testing.T, r *engines.Result) {
			checkKimiTranscript(t, r)
			// Tokens summed over both rounds; one $web_search call at ¥0.03.
			if u := r.Usage; u.InputTokens != 178+8182 || u.OutputTokens != 1+1971 || u.Searches != 1 || !glmNear(u.CostUSD, 0.03*0.14) {
				t.Errorf("usage = %+v", u)
			}
			if !strings.HasSuffix(r.Summary, "---\n\n......") {
				t.Errorf("summary end = %q", r.Summary[max(0, len(r.Summary)-40):])
			}
		},
		Unicode:      transcript,
		CheckUnicode: checkKimiTranscript,
		Empty: []enginetest.Response{
			enginetest.JSON(kimiRound1),
			{Body: []byte(`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"没有找到与该问题相关的网页。","role":"assistant"}}],"created":1776522632,"id":"chatcmpl-69e3958768e1808dabfa692d","model":"kimi-k2.5","object":"chat.completion","usage":{"completion_tokens":12,"prompt_tokens":260,"total_tokens":272}}`)},
		},
		RateLimited: enginetest.Status(429, `{"error":{"message":"Your account org-x request reached max request: 3, please try again after 1 seconds","type":"rate_limit_reached_error"}}`),
		QueryOf:     glmLastUser,
		KeyOf:       glmBearerKey,
	})
}

// The echo protocol as recorded: round 2 sends back the assistant message with its
// tool_calls and a tool message whose content is the arguments string verbatim; the
// tools array goes on every request; kimi-k2.5 gets thinking disabled.
func TestKimiEchoRequest(t *testing.T) {
	t.Parallel()
	_, reqs := enginetest.Search(t, engines.Config{Kind: "kimi", Model: "kimi-k2.5"}, engines.Query{Query: "kimi k2.6 code preview user review"},
		enginetest.JSON(kimiRound1), enginetest.JSON(kimiRound2))
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	type message map[string]any
	var sent [2]struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
		Tools    []struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Thinking struct {
			Type string `json:"type"`
		} `json:"thinking"`
	}
	for i := range sent {
		if err := json.Unmarshal(reqs[i].Body, &sent[i]); err != nil {
			t.Fatal(err)
		}
		s := sent[i]
		if reqs[i].Path != "/chat/completions" || s.Model != "kimi-k2.5" || s.Thinking.Type != "disabled" {
			t.Errorf("request %d: %s model %q thinking %q", i+1, reqs[i].Path, s.Model, s.Thinking.Type)
		}
		if len(s.Tools) != 1 || s.Tools[0].Type != "builtin_function" || s.Tools[0].Function.Name != "$web_search" {
			t.Errorf("request %d tools = %+v", i+1, s.Tools)
		}
	}
	var rec struct {
		Messages []message `json:"messages"`
	}
	json.Unmarshal(fixtures.Read("moonshot/hermoonshotes-round2-echo.request-messages.json"), &rec)
	msgs := sent[1].Messages
	if len(msgs) != 4 || msgs[0]["role"] != "system" || msgs[1]["role"] != "user" {
		t.Fatalf("round 2 messages = %v", msgs)
	}
	tool := msgs[3]
	if tool["name"] != "$web_search" {
		t.Errorf("tool message name = %v, want $web_search (the docs' form)", tool["name"])
	}
	delete(tool, "name") // the recording's client omitted it
	if !reflect.DeepEqual(msgs[2:], rec.Messages) {
		t.Errorf("echo = %v\nrecorded %v", msgs[2:], rec.Messages)
	}
}

// The transcript file holds the same exchange as logged by the client: its round-1
// request matches ours given its system prompt, and its responses, parsed in order,
// give the same result as the extracted files.
func TestKimiTranscript(t *testing.T) {
	t.Parallel()
	var (
		system   string
		round1   []map[string]any
		bodies   [][]byte
		sc       = bufio.NewScanner(bytes.NewReader(fixtures.Read("moonshot/hermoonshotes-web-search-transcript.jsonl")))
		lineType struct {
			Type     string           `json:"type"`
			Round    int              `json:"round"`
			Messages []map[string]any `json:"messages"`
			Response json.RawMessage  `json:"response"`
			ToolArgs struct {
				SystemPrompt string `json:"system_prompt"`
				Query        string `json:"query"`
			} `json:"tool_args"`
		}
	)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lineType.Messages, lineType.Response = nil, nil
		if err := json.Unmarshal(sc.Bytes(), &lineType); err != nil {
			t.Fatal(err)
		}
		switch {
		case lineType.Type == "metadata":
			system = lineType.ToolArgs.SystemPrompt
		case lineType.Type == "request" && lineType.Round == 1:
			round1 = lineType.Messages
		case lineType.Type == "response":
			bodies = append(bodies, lineType.Response)
		}
	}
	if len(bodies) != 2 || len(round1) != 2 || system == "" {
		t.Fatalf("transcript: %d responses, %d round-1 messages", len(bodies), len(round1))
	}
	opts, _ := json.Marshal(map[string]string{"systemPrompt": system})
	cfg := engines.Config{Kind: "kimi", Model: "kimi-k2.5", Options: opts}
	q := engines.Query{Query: round1[1]["content"].(string)}
	res, reqs := enginetest.Search(t, cfg, q, enginetest.Response{Body: bodies[0]}, enginetest.Response{Body: bodies[1]})
	var sent struct {
		Messages []map[string]any `json:"messages"`
	}
	json.Unmarshal(reqs[0].Body, &sent)
	if !reflect.DeepEqual(sent.Messages, round1) {
		t.Errorf("round-1 messages = %v\nrecorded %v", sent.Messages, round1)
	}
	checkKimiTranscript(t, res)

	fromFiles, err := engines.Normalize(cfg, q, fixtures.Read(kimiRound1), fixtures.Read(kimiRound2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != fromFiles.Summary || !reflect.DeepEqual(res.Citation.Sources, fromFiles.Citation.Sources) || res.Usage != fromFiles.Usage {
		t.Errorf("transcript and extracted files disagree:\n%+v\n%+v", res.Usage, fromFiles.Usage)
	}
}

// Two searches before the answer: both are echoed, counted and billed.
func TestKimiTwoSearches(t *testing.T) {
	t.Parallel()
	second := bytes.ReplaceAll(fixtures.Read(kimiRound1), []byte("t-web_search-69e395879d68"), []byte("t-web_search-second"))
	res, reqs := enginetest.Search(t, engines.Config{Kind: "kimi"}, engines.Query{Query: "kimi k2.6"},
		enginetest.JSON(kimiRound1), enginetest.Response{Body: second}, enginetest.JSON(kimiRound2))
	if len(reqs) != 3 {
		t.Fatalf("requests = %d, want 3", len(reqs))
	}
	var third struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	json.Unmarshal(reqs[2].Body, &third)
	var ids []string
	for _, m := range third.Messages {
		if m.Role == "tool" {
			ids = append(ids, m.ToolCallID)
		}
	}
	if !reflect.DeepEqual(ids, []string{"t-web_search-69e395879d68", "t-web_search-second"}) {
		t.Errorf("tool messages = %v", ids)
	}
	if u := res.Usage; u.Searches != 2 || !glmNear(u.CostUSD, 2*0.03*0.14) || u.InputTokens != 178*2+8182 {
		t.Errorf("usage = %+v", u)
	}
	if len(res.Citation.Sources) != 2 {
		t.Errorf("sources = %d", len(res.Citation.Sources))
	}
}

// A model that never stops searching is cut off after four rounds, with a warning.
func TestKimiRoundLimit(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "kimi"}, engines.Query{Query: "kimi"}, enginetest.JSON(kimiRound1))
	if len(reqs) != 4 {
		t.Errorf("requests = %d, want 4", len(reqs))
	}
	if res.Usage.Searches != 4 || res.Summary != "" || len(res.Citation.Sources) != 0 {
		t.Errorf("result = %+v", res)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "still searching after 4 rounds") {
		t.Errorf("warnings = %q", res.Warnings)
	}
}

// kimiAnswer is a final Kimi answer with the given content.
func kimiAnswer(content string) []byte {
	b, _ := json.Marshal(map[string]any{
		"choices": []any{map[string]any{"finish_reason": "stop", "index": 0, "message": map[string]any{"role": "assistant", "content": content}}},
		"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 10},
	})
	return b
}

// Links in every form the answers use: the link stays and its marker follows; a
// number-only link becomes its marker; stray [n] the model wrote go; bare URLs
// count; images do not; duplicates share a number.
func TestKimiLinkForms(t *testing.T) {
	t.Parallel()
	in := "See [1](https://a.example/x) and [**Docs**](https://b.example/y)[7]. " +
		"Also https://c.example/z. And [Foo](https://en.wikipedia.org/wiki/Foo_(bar)) " +
		"![logo](https://d.example/logo.png) again [B](<https://b.example/y> \"t\")."
	want := "See [1] and [**Docs**](https://b.example/y)[2]. " +
		"Also https://c.example/z [3]. And [Foo](https://en.wikipedia.org/wiki/Foo_(bar))[4] " +
		"![logo](https://d.example/logo.png) again [B](<https://b.example/y> \"t\")[2]."
	res, err := engines.Normalize(engines.Config{Kind: "kimi"}, engines.Query{Query: "q"}, kimiAnswer(in))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	if res.Summary != want {
		t.Errorf("summary\n got %q\nwant %q", res.Summary, want)
	}
	var got []string
	for _, s := range res.Citation.Sources {
		got = append(got, s.Web.Title+" "+s.Web.URI)
	}
	wantSrc := []string{" https://a.example/x", "Docs https://b.example/y", " https://c.example/z", "Foo https://en.wikipedia.org/wiki/Foo_(bar)"}
	if !reflect.DeepEqual(got, wantSrc) {
		t.Errorf("sources = %q, want %q", got, wantSrc)
	}
}

// No input breaks the link parser or the invariants.
func FuzzKimiAnswer(f *testing.F) {
	for _, s := range []string{
		"", "[", "](", "[a](", "[a](http://", "[a](https://x.y/(((", "[]()", "[1][2][999]",
		"[t](https://x.example/a)[t](https://x.example/a)", "https://", "http://[::1]:80/ x",
		"[\xff](https://x.example/\xfe)", "![i](https://x.example/i.png)", "【ref_1】[ref_2](https://r.example)",
		strings.Repeat("[", 1000) + "](https://x.example)" + strings.Repeat(")", 1000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		res, err := engines.Normalize(engines.Config{Kind: "kimi"}, engines.Query{Query: "q"}, kimiAnswer(content))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range engines.Markers(res.Citation.LLMContent) {
			if n < 1 || n > len(res.Citation.Sources) {
				t.Fatalf("marker [%d] with %d sources in %q", n, len(res.Citation.Sources), res.Summary)
			}
		}
	})
}
