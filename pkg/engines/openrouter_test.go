package engines_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

const (
	orAnnotations = "openrouter/pydantic-server-tool-web-search-annotations.response.json"
	orUsage       = "openrouter/pydantic-server-tool-web-search-usage.response.json"
	orUnicode     = "openrouter/chat-url-citation-char-offsets-unicode.CONSTRUCTED.json"
)

func TestOpenRouterConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "openrouter"},
		OK:     []enginetest.Response{enginetest.JSON(orAnnotations)},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Citation.Sources) != 5 || len(r.Hits) != 5 {
				t.Fatalf("sources = %d, hits = %d, want 5", len(r.Citation.Sources), len(r.Hits))
			}
			if s := r.Citation.Sources[0].Web; s.URI != "https://github.com/pydantic/pydantic-ai" || s.Title != "AI Agent Framework, the Pydantic way" {
				t.Errorf("source 1 = %+v", s)
			}
			if !strings.HasPrefix(r.Hits[0].Snippet, "# pydantic/pydantic-ai") {
				t.Errorf("snippet = %q", r.Hits[0].Snippet)
			}
			// Offsets are 0/0: every marker goes after the one line that names the
			// URL or its host, kept apart from the bare URL.
			if r.Summary != "https://github.com/pydantic/pydantic-ai [1][2][3][4][5]" {
				t.Errorf("summary = %q", r.Summary)
			}
			// The untitled source is shown by its host.
			if !strings.Contains(r.Citation.LLMContent, "[2] pydantic.dev (https://pydantic.dev/pydantic-ai)") {
				t.Errorf("LLMContent:\n%s", r.Citation.LLMContent)
			}
			if u := r.Usage; u.CostUSD != 0.007637029 || u.Searches != 1 || u.InputTokens != 2315 || u.OutputTokens != 40 {
				t.Errorf("usage = %+v", u)
			}
		},
		Unicode: []enginetest.Response{enginetest.JSON(orUnicode)},
		CheckUnicode: func(t *testing.T, r *engines.Result) {
			// Character offsets (not bytes: 144 vs 148 and 233 vs 267 here) put the
			// markers right after the cited "([domain](url))" spans.
			enginetest.MarkerAfter(t, r.Summary, "([climatempo.com.br](https://www.climatempo.com.br/previsao-do-tempo/cidade/558/saopaulo-sp))", "[1].")
			enginetest.MarkerAfter(t, r.Summary, "最高気温は18 °C ([tenki.jp](https://tenki.jp/forecast/3/16/4410/13101/))", "[2].")
			// The 0/0 annotation names nothing in the text: end of the text.
			if !strings.HasSuffix(r.Summary, "chuva fraca no fim de semana.[3]") {
				t.Errorf("summary = %q", r.Summary)
			}
			if s := r.Citation.Sources[1].Web; s.Title != "東京都千代田区の天気 - 日本気象協会 tenki.jp" {
				t.Errorf("source 2 = %+v", s)
			}
		},
		// A real answer with no search and no annotations.
		Empty:       []enginetest.Response{enginetest.JSON("openrouter/pydantic-server-tool-web-search-full-params.response.json")},
		RateLimited: enginetest.Status(429, "openrouter/pydantic-error-429-provider-returned-error.json"),
		QueryOf:     glmLastUser,
		KeyOf:       glmBearerKey,
	})
}

// openrouterAssemble joins a recorded SSE stream into the non-streaming body it stands
// for: ": OPENROUTER PROCESSING" comments skipped, content deltas concatenated,
// annotations collected from the deltas, usage from the last chunk that has it.
func openrouterAssemble(t *testing.T, sse []byte) []byte {
	t.Helper()
	var (
		content     strings.Builder
		annotations []json.RawMessage
		usage       json.RawMessage
		finish      string
		done        bool
	)
	sc := bufio.NewScanner(bytes.NewReader(sse))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected SSE line %q", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content     string            `json:"content"`
					Annotations []json.RawMessage `json:"annotations"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			content.WriteString(ch.Delta.Content)
			annotations = append(annotations, ch.Delta.Annotations...)
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
		if len(c.Usage) > 0 {
			usage = c.Usage
		}
	}
	if !done {
		t.Error("stream did not end with [DONE]")
	}
	body, _ := json.Marshal(map[string]any{
		"object":  "chat.completion",
		"usage":   usage,
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": map[string]any{"role": "assistant", "content": content.String(), "annotations": annotations}}},
	})
	return body
}

func TestOpenRouterAnnotationsStream(t *testing.T) {
	t.Parallel()
	body := openrouterAssemble(t, fixtures.Read("openrouter/pydantic-server-tool-web-search-annotations-stream.sse"))
	res, err := engines.Normalize(engines.Config{Kind: "openrouter"}, engines.Query{Query: "Pydantic AI GitHub"}, body)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	enginetest.MarkerAfter(t, res.Summary, "The URL for Pydantic AI's GitHub repository is:  \n\nhttps://github.com/pydantic/pydantic-ai", " [1][2][3][4][5]")
	// The streamed annotation titles differ from the non-streamed recording's.
	if s := res.Citation.Sources[0].Web.Title; s != "AI Agent Framework, the Pydantic way - GitHub" {
		t.Errorf("source 1 title = %q", s)
	}
	if len(res.Hits) != 5 || !strings.HasPrefix(res.Hits[2].Snippet, "- Tag: v2.0.0") {
		t.Errorf("hits = %+v", res.Hits)
	}
	if u := res.Usage; u.CostUSD != 0.0076509169000000005 || u.Searches != 1 || u.InputTokens != 2317 || u.OutputTokens != 53 {
		t.Errorf("usage = %+v", u)
	}
}

// gpt-4.1-mini searched (web_search_requests 1, cost 0.0133) but OpenRouter returned
// no annotations: the URL in the answer is the source, and the stream says the same.
func TestOpenRouterUsageWithoutAnnotations(t *testing.T) {
	t.Parallel()
	q := engines.Query{Query: "Pydantic AI GitHub"}
	res, err := engines.Normalize(engines.Config{Kind: "openrouter"}, q, fixtures.Read(orUsage))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	if res.Summary != "https://github.com/pydantic/pydantic-ai [1] " {
		t.Errorf("summary = %q", res.Summary)
	}
	if len(res.Citation.Sources) != 1 || res.Citation.Sources[0].Web.URI != "https://github.com/pydantic/pydantic-ai" {
		t.Errorf("sources = %+v", res.Citation.Sources)
	}
	if u := res.Usage; u.CostUSD != 0.0133176 || u.Searches != 1 || u.InputTokens != 8174 || u.OutputTokens != 30 {
		t.Errorf("usage = %+v", u)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "no url_citation annotations") {
		t.Errorf("warnings = %q", res.Warnings)
	}
	streamed, err := engines.Normalize(engines.Config{Kind: "openrouter"}, q,
		openrouterAssemble(t, fixtures.Read("openrouter/pydantic-server-tool-web-search-usage-stream.sse")))
	if err != nil {
		t.Fatal(err)
	}
	if streamed.Summary != res.Summary || !reflect.DeepEqual(streamed.Citation.Sources, res.Citation.Sources) || streamed.Usage != res.Usage {
		t.Errorf("stream = %q %+v, non-stream = %q %+v", streamed.Summary, streamed.Usage, res.Summary, res.Usage)
	}
}

type openrouterSent struct {
	Model    string                           `json:"model"`
	Stream   bool                             `json:"stream"`
	Messages []struct{ Role, Content string } `json:"messages"`
	Tools    []struct {
		Type       string         `json:"type"`
		Parameters map[string]any `json:"parameters"`
	} `json:"tools"`
	Plugins []map[string]any `json:"plugins"`
}

// The recorded requests: the same server tool and parameters, the query as the last
// (user) message; we never stream.
func TestOpenRouterRequestShape(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"openrouter/pydantic-server-tool-web-search-annotations.request.json",
		"openrouter/pydantic-server-tool-web-search-annotations-stream.request.json",
		"openrouter/pydantic-server-tool-web-search-usage.request.json",
	} {
		var rec openrouterSent
		if err := json.Unmarshal(fixtures.Read(name), &rec); err != nil {
			t.Fatal(err)
		}
		cfg := engines.Config{Kind: "openrouter", Model: rec.Model, Options: json.RawMessage(`{"searchContextSize":"medium"}`)}
		_, reqs := enginetest.Search(t, cfg, engines.Query{Query: rec.Messages[0].Content}, enginetest.JSON(orAnnotations))
		var sent openrouterSent
		json.Unmarshal(reqs[0].Body, &sent)
		if reqs[0].Path != "/chat/completions" || sent.Model != rec.Model || sent.Stream {
			t.Errorf("%s: path %s model %q stream %v", name, reqs[0].Path, sent.Model, sent.Stream)
		}
		if last := sent.Messages[len(sent.Messages)-1]; last != rec.Messages[0] {
			t.Errorf("%s: last message = %+v", name, last)
		}
		if len(sent.Tools) != 1 || sent.Tools[0].Type != rec.Tools[0].Type {
			t.Fatalf("%s: tools = %+v", name, sent.Tools)
		}
		for k, v := range rec.Tools[0].Parameters {
			if sent.Tools[0].Parameters[k] != v {
				t.Errorf("%s: parameters.%s = %#v, want %#v", name, k, sent.Tools[0].Parameters[k], v)
			}
		}
		if sent.Tools[0].Parameters["max_results"] != 10.0 {
			t.Errorf("%s: max_results = %#v", name, sent.Tools[0].Parameters["max_results"])
		}
	}
}

// The full-params recording: domains, location and context size in the server tool.
// The docs forbid combining allowed and excluded domains, so with both only the allow
// list is sent (the block list is enforced on the answer).
func TestOpenRouterFullParamsRequest(t *testing.T) {
	t.Parallel()
	var rec openrouterSent
	json.Unmarshal(fixtures.Read("openrouter/pydantic-server-tool-web-search-full-params.request.json"), &rec)
	p := rec.Tools[0].Parameters
	loc := p["user_location"].(map[string]any)
	cfg := engines.Config{Kind: "openrouter", Model: rec.Model, Options: json.RawMessage(`{"searchContextSize":"low"}`)}
	send := func(q engines.Query) map[string]any {
		t.Helper()
		_, reqs := enginetest.Search(t, cfg, q, enginetest.JSON("openrouter/pydantic-server-tool-web-search-full-params.response.json"))
		var sent openrouterSent
		json.Unmarshal(reqs[0].Body, &sent)
		return sent.Tools[0].Parameters
	}
	got := send(engines.Query{Query: rec.Messages[0].Content, AllowedDomains: []string{"pydantic.dev"}, BlockedDomains: []string{"example.com"}, Country: loc["country"].(string)})
	for _, k := range []string{"allowed_domains", "max_uses", "search_context_size"} {
		if !reflect.DeepEqual(got[k], p[k]) {
			t.Errorf("%s = %#v, want %#v", k, got[k], p[k])
		}
	}
	if gl := got["user_location"].(map[string]any); gl["type"] != loc["type"] || gl["country"] != loc["country"] {
		t.Errorf("user_location = %#v", gl)
	}
	if _, ok := got["excluded_domains"]; ok {
		t.Errorf("excluded_domains sent with allowed_domains: %#v", got)
	}
	got = send(engines.Query{Query: "q", BlockedDomains: []string{"example.com"}})
	if !reflect.DeepEqual(got["excluded_domains"], p["excluded_domains"]) {
		t.Errorf("excluded_domains = %#v, want %#v", got["excluded_domains"], p["excluded_domains"])
	}
}

// The older plugin form, by option.
func TestOpenRouterPluginForm(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "openrouter", Options: json.RawMessage(`{"plugin":true,"engine":"exa"}`)},
		engines.Query{Query: "q", Count: 3, BlockedDomains: []string{"example.com"}, Country: "GB"}, enginetest.JSON(orAnnotations))
	var sent openrouterSent
	json.Unmarshal(reqs[0].Body, &sent)
	want := []map[string]any{{"id": "web", "engine": "exa", "max_results": 3.0, "exclude_domains": []any{"example.com"}}}
	if len(sent.Tools) != 0 || !reflect.DeepEqual(sent.Plugins, want) {
		t.Errorf("tools %v plugins %v", sent.Tools, sent.Plugins)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), `country "GB" is not supported`) {
		t.Errorf("warnings = %q", res.Warnings)
	}
}

// Blocked domains are enforced on the annotations: the github.com pages go, the
// pydantic.dev ones are renumbered.
func TestOpenRouterBlockedDomainsEnforced(t *testing.T) {
	t.Parallel()
	res, err := engines.Normalize(engines.Config{Kind: "openrouter"}, engines.Query{Query: "q", BlockedDomains: []string{"github.com"}}, fixtures.Read(orAnnotations))
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckInvariants(t, res)
	if len(res.Citation.Sources) != 2 || res.Citation.Sources[1].Web.URI != "https://pydantic.dev/docs/ai/overview/" || len(res.Hits) != 2 {
		t.Errorf("sources = %+v, hits = %d", res.Citation.Sources, len(res.Hits))
	}
	if res.Summary != "https://github.com/pydantic/pydantic-ai [1][2]" {
		t.Errorf("summary = %q", res.Summary)
	}
}

// OpenRouter reports errors inside 200 answers too, at the top level or on the choice.
func TestOpenRouterInBandErrors(t *testing.T) {
	t.Parallel()
	recorded := fixtures.Read("openrouter/pydantic-error-429-provider-returned-error.json")
	for _, tc := range []struct {
		body []byte
		want engines.ErrorKind
		text string
	}{
		{recorded, engines.RateLimited, "temporarily rate-limited upstream"},
		{[]byte(`{"error":{"code":502,"message":"Provider returned error"}}`), engines.Unavailable, "502"},
		{[]byte(`{"choices":[{"finish_reason":"error","message":{"content":""},"error":{"code":400,"message":"Invalid tool parameters"}}]}`), engines.BadRequest, "Invalid tool parameters"},
	} {
		_, err, _ := enginetest.Do(t, engines.Config{Kind: "openrouter"}, engines.Query{Query: "q"}, enginetest.Response{Body: tc.body})
		var e *engines.Error
		if !errors.As(err, &e) || e.Kind != tc.want || !strings.Contains(e.Message, tc.text) {
			t.Errorf("err = %v, want %s mentioning %q", err, tc.want, tc.text)
		}
	}
}

// Annotated spans that do not check out fall back to text search; arbitrary offsets
// never break the placement.
func TestOpenRouterOffsetsFallback(t *testing.T) {
	t.Parallel()
	mk := func(text string, start, end int) []byte {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"finish_reason": "stop", "message": map[string]any{
			"content": text,
			"annotations": []any{map[string]any{"type": "url_citation", "url_citation": map[string]any{
				"url": "https://docs.example.org/page", "title": "Example Docs", "start_index": start, "end_index": end}}},
		}}}})
		return b
	}
	for _, tc := range []struct {
		text       string
		start, end int
		want       string
	}{
		{"First line. See docs.example.org for more. Last.", 0, 0, "First line. See docs.example.org for more.[1] Last."},
		{"First line. See docs.example.org for more. Last.", 0, 10, "First line. See docs.example.org for more.[1] Last."}, // span lacks the host
		{"Read the Example Docs\nthen stop", -5, 99999, "Read the Example Docs[1]\nthen stop"},
		{"nothing here", 3, 2, "nothing here[1]"},
		{"東京 docs.example.org 晴れ。次", 3, 19, "東京 docs.example.org[1] 晴れ。次"},
	} {
		res, err := engines.Normalize(engines.Config{Kind: "openrouter"}, engines.Query{Query: "q"}, mk(tc.text, tc.start, tc.end))
		if err != nil {
			t.Fatal(err)
		}
		enginetest.CheckInvariants(t, res)
		if res.Summary != tc.want {
			t.Errorf("%q [%d,%d] -> %q, want %q", tc.text, tc.start, tc.end, res.Summary, tc.want)
		}
	}
}
