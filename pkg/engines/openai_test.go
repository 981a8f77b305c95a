package engines_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

// openaiEmpty is a Responses API answer in its real shape for a search that found
// nothing: a message with no annotations and no web_search_call sources.
const openaiEmpty = `{"id":"resp_empty","object":"response","status":"completed","error":null,"model":"gpt-5-mini-2025-08-07","output":[{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"q","sources":[]}},{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"I found no web results for that query."}]}],"usage":{"input_tokens":900,"output_tokens":12,"total_tokens":912}}`

// The vercel gpt-5-mini recording: 10 url_citation annotations over 7 pages in a text
// with — “ ” ’ (3,042 characters, 3,092 bytes).
const openaiVercel = "openai/vercel-responses-web-search-gpt5mini.json"

func openaiQueryOf(_ *http.Request, body []byte) string {
	var req struct {
		Input []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"input"`
	}
	json.Unmarshal(body, &req)
	for i := len(req.Input) - 1; i >= 0; i-- {
		if req.Input[i].Role == "user" {
			return req.Input[i].Content
		}
	}
	return ""
}

func TestOpenAIConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "openai"},
		OK:     []enginetest.Response{enginetest.JSON(openaiVercel)},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Citation.Sources) != 7 {
				t.Fatalf("sources = %d, want the 7 cited pages", len(r.Citation.Sources))
			}
			if s := r.Citation.Sources[0].Web; s.Title != "Why OpenAI declared a code red for ChatGPT | The Verge" ||
				s.URI != "https://www.theverge.com/podcast/838932/openai-chatgpt-code-red-vergecast" {
				t.Errorf("source 1 = %+v", s)
			}
			// utm_source=openai is dropped from cited URLs.
			if got := r.Citation.Sources[2].Web.URI; got != "https://www.investopedia.com/5-things-to-know-before-the-stock-market-opens-december-5-2025-11862701" {
				t.Errorf("source 3 = %q", got)
			}
			enginetest.MarkerAfter(t, r.Summary, "(discussion and analysis on The Vergecast). ([theverge.com](https://www.theverge.com/podcast/838932/openai-chatgpt-code-red-vergecast))", "[1]")
			enginetest.MarkerAfter(t, r.Summary, "([investopedia.com](https://www.investopedia.com/5-things-to-know-before-the-stock-market-opens-december-5-2025-11862701?utm_source=openai))", "[3]")
			if n := len(engines.Markers(r.Summary)); n != 10 {
				t.Errorf("%d markers, want one per annotation (10)", n)
			}
			if len(r.Hits) != 5 || r.Hits[0].Title != "Why OpenAI declared a code red for ChatGPT | The Verge" {
				t.Errorf("hits = %+v", r.Hits)
			}
			want := engines.Usage{Searches: 1, InputTokens: 19681, OutputTokens: 3773, CostUSD: 0.01}
			if r.Usage != want {
				t.Errorf("usage = %+v, want %+v", r.Usage, want)
			}
		},
		// Character offsets: byte offsets would land 50 bytes early by the last citation.
		Unicode: []enginetest.Response{enginetest.JSON(openaiVercel)},
		CheckUnicode: func(t *testing.T, r *engines.Result) {
			enginetest.MarkerAfter(t, r.Summary, "Vercel’s own blog post (“Towards the AI Cloud: Our Series F”) — search for \"vercel\": found (company announcement / Series F details). ([vercel.com](https://vercel.com/blog/series-f))", "[4]")
			enginetest.MarkerAfter(t, r.Summary, "Bloomberg (article: “Vercel Notches $9.3 Billion Valuation…” / Vercel coverage) — search for \"vercel\": found (article is about Vercel’s funding/valuation). ([bloomberg.com](https://www.bloomberg.com/news/articles/2025-09-30/vercel-notches-9-3-billion-valuation-in-latest-ai-funding-round))", "[7]")
			enginetest.MarkerAfter(t, r.Summary, "([wired.com](https://www.wired.com/story/the-big-interview-2025-recap))", "[6]")
		},
		Empty: []enginetest.Response{{Body: []byte(openaiEmpty)}},
		// No 429 was recorded; this is OpenAI's documented envelope for one.
		RateLimited: enginetest.Status(429, `{"error":{"message":"Rate limit reached for gpt-5-mini in organization org-abc on tokens per min (TPM): Limit 200000, Used 199500, Requested 1200. Please try again in 210ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`),
		AuthError:   enginetest.Status(401, `{"error":{"message":"Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`),
		QueryOf:     openaiQueryOf,
		KeyOf:       func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") },
	})
}

func openaiNormalize(t *testing.T, q engines.Query, body []byte) *engines.Result {
	t.Helper()
	if q.Query == "" {
		q.Query = "q"
	}
	r, err := engines.Normalize(engines.Config{Kind: "openai"}, q, body)
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	enginetest.CheckInvariants(t, r)
	return r
}

// Every recorded Responses API body, with values read off the recording.
func TestOpenAIResponsesFixtures(t *testing.T) {
	t.Parallel()
	read := fixtures.Read
	t.Run("gpt-5.2 raw annotations", func(t *testing.T) {
		r := openaiNormalize(t, engines.Query{}, read("openai/pydantic-responses-raw-annotations-gpt52.response.json"))
		if len(r.Citation.Sources) != 1 || r.Citation.Sources[0].Web.URI != "https://www.britannica.com/place/Mount-Columbia" ||
			r.Citation.Sources[0].Web.Title != "Mount Columbia | mountain, Alberta, Canada | Britannica" {
			t.Errorf("sources = %+v", r.Citation.Sources)
		}
		enginetest.MarkerAfter(t, r.Summary, "is Alberta's highest point. ([britannica.com](https://www.britannica.com/place/Mount-Columbia?utm_source=openai))", "[1]")
		if r.Usage != (engines.Usage{Searches: 1, InputTokens: 8530, OutputTokens: 98, CostUSD: 0.01}) {
			t.Errorf("usage = %+v", r.Usage)
		}
	})
	t.Run("allowed domains: two searches, two page opens, no citations", func(t *testing.T) {
		r := openaiNormalize(t, engines.Query{AllowedDomains: []string{"wikipedia.org"}}, read("openai/pydantic-responses-web-search-allowed-domains.response.json"))
		if r.Summary != "14195730" || len(r.Hits) != 0 {
			t.Errorf("summary %q hits %d", r.Summary, len(r.Hits))
		}
		if r.Usage.Searches != 2 || r.Usage.CostUSD != 0.02 || r.Usage.OutputTokens != 1737 {
			t.Errorf("usage = %+v (open_page is not a billed search)", r.Usage)
		}
		if len(r.Warnings) != 0 {
			t.Errorf("warnings = %v: OpenAI filters domains itself", r.Warnings)
		}
	})
	t.Run("no external access: tool_usage counts the search", func(t *testing.T) {
		r := openaiNormalize(t, engines.Query{}, read("openai/pydantic-responses-web-search-no-external-access.response.json"))
		enginetest.MarkerAfter(t, r.Summary, "1889 ([toureiffel.paris](https://www.toureiffel.paris/en/news/history-and-culture/133-years-and-1083-feet?utm_source=openai))", "[1]")
		if r.Citation.Sources[0].Web.Title != "133 years and 330 metres - The Eiffel Tower" || r.Usage.Searches != 1 {
			t.Errorf("source %+v usage %+v", r.Citation.Sources[0], r.Usage)
		}
	})
	for _, c := range []struct{ file, text string }{
		{"openai/pydantic-responses-web-search.response.json", "It’s around 73°F now, with a high near 74°F and a low around 58°F tonight."},
		{"openai/pydantic-responses-web-search-turn2.response.json", "in Mexico City: mostly cloudy, around 73°F (23°C) now."},
		{"openai/pydantic-responses-web-search-user-location-region.response.json", "Here’s the weather in Salvador, Bahia right now"},
	} {
		t.Run(c.file, func(t *testing.T) {
			// Weather widget answers: one search, no page list, no citations.
			r := openaiNormalize(t, engines.Query{}, read(c.file))
			if !strings.Contains(r.Summary, c.text) || len(r.Hits) != 0 || len(engines.Markers(r.Summary)) != 0 {
				t.Errorf("summary %q, hits %d", r.Summary, len(r.Hits))
			}
			if r.Usage.Searches != 1 || r.Usage.CostUSD != 0.01 {
				t.Errorf("usage = %+v", r.Usage)
			}
		})
	}
	t.Run("azure: status searching still counts", func(t *testing.T) {
		r := openaiNormalize(t, engines.Query{}, read("openai/vercel-azure-responses-web-search-preview.json"))
		if r.Usage.Searches != 2 || r.Usage.CostUSD != 0.02 {
			t.Errorf("usage = %+v", r.Usage)
		}
		enginetest.MarkerAfter(t, r.Summary, "investment pledge by Saudi Arabia in the U.S. [The Straits Times](https://www.straitstimes.com/world/while-you-were-sleeping-5-stories-you-might-have-missed-nov-19-2025)", "[1]")
		if n := len(engines.Markers(r.Summary)); n != 1 {
			t.Errorf("%d markers: the two later uncited links must stay unmarked", n)
		}
		if len(r.Hits) != 1 || r.Hits[0].Title != "While You Were Sleeping: 5 stories you might have missed, Nov 19, 2025" {
			t.Errorf("hits = %+v", r.Hits)
		}
	})
	t.Run("preview gpt-4o-mini: sources without citations", func(t *testing.T) {
		r := openaiNormalize(t, engines.Query{Count: 20}, read("openai/vercel-responses-web-search-preview-gpt4omini.json"))
		if len(r.Hits) != 12 || r.Hits[0].URL != "https://platform.openai.com/docs/quickstart/make-your-first-api-request" ||
			r.Hits[2].URL != "https://platform.openai.com/docs/api-reference/backward-compatibility?lang=ruby" {
			t.Errorf("hits = %+v", r.Hits)
		}
		// Uncited pages still reach the model's text.
		if len(r.Citation.Sources) != 12 || !strings.Contains(r.Citation.LLMContent, "[2] developers.openai.com (https://developers.openai.com/api/docs/models)") {
			t.Errorf("LLMContent:\n%s", r.Citation.LLMContent)
		}
		if !strings.HasPrefix(r.Summary, "The official OpenAI API documentation page is titled") || r.Usage.Searches != 1 {
			t.Errorf("summary %q usage %+v", r.Summary, r.Usage)
		}
	})
	t.Run("preview gpt-5-mini: queries and 33 sources", func(t *testing.T) {
		r := openaiNormalize(t, engines.Query{Count: 50}, read("openai/vercel-responses-web-search-preview-gpt5mini-queries.json"))
		if r.Summary != "AI SDK ([ai-sdk.dev](https://ai-sdk.dev/))[1]" {
			t.Errorf("summary = %q", r.Summary)
		}
		if len(r.Hits) != 34 || r.Hits[0].Title != "AI SDK" || r.Hits[1].URL != "https://ai-sdk.dev/docs/introduction" {
			t.Errorf("hits = %d, first %+v", len(r.Hits), r.Hits[:2])
		}
		if r.Usage.Searches != 1 || r.Usage.InputTokens != 12733 {
			t.Errorf("usage = %+v", r.Usage)
		}
	})
}

// openaiCompleted returns the response object of the response.completed event of a
// Responses stream (raw SSE, or one data payload per line), and the concatenated
// output_text deltas.
func openaiCompleted(t *testing.T, raw []byte) ([]byte, string) {
	t.Helper()
	frames := groundedASSEData(raw)
	if len(frames) == 0 { // .chunks.jsonl: one payload per line
		for _, l := range bytes.Split(raw, []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 {
				frames = append(frames, l)
			}
		}
	}
	var deltas strings.Builder
	for _, f := range frames {
		var ev struct {
			Type     string          `json:"type"`
			Delta    string          `json:"delta"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(f, &ev); err != nil {
			t.Fatalf("event: %v", err)
		}
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed":
			return ev.Response, deltas.String()
		}
	}
	t.Fatal("no response.completed event")
	return nil, ""
}

func TestOpenAIStreamsAssembled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file     string
		searches int
		sources  int
		check    func(t *testing.T, r *engines.Result)
	}{
		{"openai/vercel-responses-web-search-stream.chunks.jsonl", 2, 7, func(t *testing.T, r *engines.Result) {
			if r.Citation.Sources[0].Web.URI != "https://techcrunch.com/2025/12/05/petco-confirms-security-lapse-exposed-customers-personal-data/" {
				t.Errorf("source 1 = %+v", r.Citation.Sources[0])
			}
			if n := len(engines.Markers(r.Summary)); n != 12 {
				t.Errorf("%d markers, want 12", n)
			}
			enginetest.MarkerAfter(t, r.Summary, "([finance.yahoo.com](https://finance.yahoo.com/news/ai-coding-startup-vercel-raises-163055044.html?utm_source=openai))", "[7]")
		}},
		{"openai/vercel-azure-responses-web-search-preview-stream.chunks.jsonl", 1, 1, func(t *testing.T, r *engines.Result) {
			enginetest.MarkerAfter(t, r.Summary, "(https://www.straitstimes.com/world/while-you-were-sleeping-5-stories-you-might-have-missed-nov-19-2025)", "[1]")
		}},
		{"openai/pydantic-responses-web-search-stream.sse", 1, 0, func(t *testing.T, r *engines.Result) {
			// The only source is {type: api, name: oai-weather}: not a page.
			if len(r.Hits) != 0 || !strings.Contains(r.Summary, "Current conditions around 71°F") {
				t.Errorf("hits %+v summary %q", r.Hits, r.Summary)
			}
		}},
		{"openai/pydantic-responses-raw-annotations-stream.sse", 2, 1, func(t *testing.T, r *engines.Result) {
			enginetest.MarkerAfter(t, r.Summary, "(3,747 m / 12,294 ft). ([britannica.com](https://www.britannica.com/place/Mount-Columbia?utm_source=openai))", "[1]")
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			body, deltas := openaiCompleted(t, fixtures.Read(c.file))
			r := openaiNormalize(t, engines.Query{Count: 1}, body)
			// The final text is what the deltas spelled, plus our markers.
			if plain := engines.RenumberMarkers(r.Summary, func(int) int { return 0 }); plain != strings.TrimSpace(deltas) && plain != deltas {
				t.Errorf("summary without markers differs from the streamed deltas")
			}
			if r.Usage.Searches != c.searches || len(r.Citation.Sources) != c.sources {
				t.Errorf("searches %d sources %d", r.Usage.Searches, len(r.Citation.Sources))
			}
			c.check(t, r)
		})
	}
}

// A span without the link (offsets only) is trusted in characters: byte offsets would
// put the marker two characters early here.
func TestOpenAICharacterOffsets(t *testing.T) {
	t.Parallel()
	text := "Zürich — “mild” today. Rain tomorrow."
	body, _ := json.Marshal(map[string]any{
		"status": "completed",
		"output": []any{map[string]any{"type": "message", "content": []any{map[string]any{
			"type": "output_text", "text": text,
			"annotations": []any{
				map[string]any{"type": "url_citation", "start_index": 0, "end_index": 22, "url": "https://meteo.example/zurich", "title": "Zürich weather"},
				// 0/0 annotations (seen on other providers) with the URL nowhere in the
				// text go to the end, not the start.
				map[string]any{"type": "url_citation", "start_index": 0, "end_index": 0, "url": "https://other.example/", "title": "Other"},
			},
		}}}},
	})
	r := openaiNormalize(t, engines.Query{}, body)
	if want := "Zürich — “mild” today.[1] Rain tomorrow.[2]"; r.Summary != want {
		t.Errorf("summary = %q, want %q", r.Summary, want)
	}
}

func TestOpenAIErrors(t *testing.T) {
	t.Parallel()
	q := engines.Query{Query: "q"}
	for _, c := range []struct {
		resp enginetest.Response
		kind engines.ErrorKind
		msg  string
	}{
		{enginetest.Status(400, "openai/vercel-error-tool-choice-not-found-400.json"), engines.BadRequest, "Tool choice 'web_search' not found in 'tools' parameter."},
		{enginetest.Status(400, "openai/pydantic-chat-web-search-options-unsupported-400.response.json"), engines.BadRequest, "Web search options not supported with this model."},
		{enginetest.Status(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`), engines.Quota, "exceeded your current quota"},
		// A background-style failed response inside a 200.
		{enginetest.Response{Body: []byte(`{"id":"resp_x","object":"response","status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit exceeded."},"output":[]}`)}, engines.RateLimited, "Rate limit exceeded."},
		{enginetest.Response{Body: []byte(`{"id":"resp_x","object":"response","status":"failed","error":{"code":"server_error","message":"The server had an error."},"output":[]}`)}, engines.Unavailable, "server had an error"},
		{enginetest.Response{Body: []byte(`{"id":"resp_x","status":"completed","output":[{"type":"message","content":[{"type":"refusal","refusal":"I can't help with that."}]}]}`)}, engines.BadRequest, "refused the query"},
		{enginetest.Response{Body: []byte(`{"object":"list","data":[]}`)}, engines.Decode, "not a Responses API response"},
	} {
		_, err, _ := enginetest.Do(t, engines.Config{Kind: "openai"}, q, c.resp)
		e := groundedAWantError(t, err, c.kind, c.msg)
		if c.resp.Status != 0 && e.Status != c.resp.Status {
			t.Errorf("status = %d, want %d", e.Status, c.resp.Status)
		}
	}
}

// The outgoing request has the shape of the recorded Responses requests, with the
// query's domain and country filters in the tool.
func TestOpenAIRequestMatchesRecordings(t *testing.T) {
	t.Parallel()
	cfg := engines.Config{Kind: "openai", Model: "gpt-5", Options: json.RawMessage(`{"searchContextSize":"medium"}`)}
	q := engines.Query{Query: "Search Google for the current population of Tokyo prefecture.", AllowedDomains: []string{"wikipedia.org"}, Country: "br"}
	res, reqs := enginetest.Search(t, cfg, q, enginetest.JSON("openai/pydantic-responses-web-search-allowed-domains.response.json"))
	if len(res.Warnings) != 0 {
		t.Errorf("warnings = %v", res.Warnings)
	}
	if reqs[0].Path != "/v1/responses" || reqs[0].Header.Get("Authorization") != "Bearer sk-test-key" {
		t.Errorf("request %s %v", reqs[0].Path, reqs[0].Header)
	}
	var sent map[string]json.RawMessage
	json.Unmarshal(reqs[0].Body, &sent)
	var sentTools []map[string]json.RawMessage
	json.Unmarshal(sent["tools"], &sentTools)
	if len(sentTools) != 1 {
		t.Fatalf("tools = %s", sent["tools"])
	}
	if !groundedAJSONEqual(sentTools[0]["filters"], json.RawMessage(`{"allowed_domains":["wikipedia.org"]}`)) ||
		!groundedAJSONEqual(sentTools[0]["user_location"], json.RawMessage(`{"type":"approximate","country":"BR"}`)) ||
		!groundedAJSONEqual(sent["include"], json.RawMessage(`["web_search_call.action.sources"]`)) {
		t.Errorf("tool = %s, include = %s", sent["tools"], sent["include"])
	}

	files, _ := groundedAGlob("openai", "pydantic-responses-", ".request.json")
	if len(files) != 8 {
		t.Fatalf("recorded Responses requests = %d, want 8", len(files))
	}
	for _, f := range files {
		var rec map[string]json.RawMessage
		json.Unmarshal(fixtures.Read(f), &rec)
		for k := range rec {
			switch k {
			case "stream", "previous_response_id": // transport details we do not use
				continue
			}
			if _, ok := sent[k]; !ok {
				t.Errorf("%s: recorded key %q not sent", f, k)
			}
		}
		var recTools []map[string]json.RawMessage
		json.Unmarshal(rec["tools"], &recTools)
		if !groundedAJSONEqual(recTools[0]["type"], sentTools[0]["type"]) || !groundedAJSONEqual(recTools[0]["search_context_size"], sentTools[0]["search_context_size"]) {
			t.Errorf("%s: tool = %s, sent %s", f, rec["tools"], sent["tools"])
		}
		if uf, ok := recTools[0]["filters"]; ok && !groundedAJSONEqual(uf, sentTools[0]["filters"]) {
			t.Errorf("%s: filters = %s, sent %s", f, uf, sentTools[0]["filters"])
		}
		if ul, ok := recTools[0]["user_location"]; ok {
			var a, b struct{ Type string }
			json.Unmarshal(ul, &a)
			json.Unmarshal(sentTools[0]["user_location"], &b)
			if a.Type != b.Type {
				t.Errorf("%s: user_location type %q, sent %q", f, a.Type, b.Type)
			}
		}
		var recInput []struct{ Role string }
		json.Unmarshal(rec["input"], &recInput)
		var sentInput []struct{ Role, Content string }
		json.Unmarshal(sent["input"], &sentInput)
		if len(sentInput) != 1 || sentInput[0].Role != recInput[0].Role || sentInput[0].Content != q.Query {
			t.Errorf("%s: input = %s", f, sent["input"])
		}
	}
	// The stream recording asked for the same include entry.
	var stream struct{ Include []string }
	json.Unmarshal(fixtures.Read("openai/pydantic-responses-web-search-stream.request.json"), &stream)
	if !slices.Contains(stream.Include, "web_search_call.action.sources") {
		t.Errorf("recorded include = %v", stream.Include)
	}
}

// The preview tool takes no domain filter: it is then applied afterwards, with a warning.
func TestOpenAIPreviewToolFilters(t *testing.T) {
	t.Parallel()
	cfg := engines.Config{Kind: "openai", Options: json.RawMessage(`{"toolType":"web_search_preview"}`)}
	res, reqs := enginetest.Search(t, cfg, engines.Query{Query: "ai sdk", AllowedDomains: []string{"ai-sdk.dev"}, Count: 50},
		enginetest.JSON("openai/vercel-responses-web-search-preview-gpt5mini-queries.json"))
	var sent struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	json.Unmarshal(reqs[0].Body, &sent)
	if string(sent.Tools[0]["type"]) != `"web_search_preview"` || sent.Tools[0]["filters"] != nil {
		t.Errorf("tool = %v", sent.Tools[0])
	}
	for _, h := range res.Hits {
		if !strings.Contains(h.URL, "ai-sdk.dev") {
			t.Errorf("hit %s survived the domain filter", h.URL)
		}
	}
	if len(res.Hits) == 0 || len(res.Warnings) == 0 {
		t.Errorf("hits %d warnings %v", len(res.Hits), res.Warnings)
	}
	if _, err := engines.Normalize(engines.Config{Kind: "openai", Options: json.RawMessage(`{"searchContextSize":"huge"}`)}, engines.Query{Query: "q"}); err == nil {
		t.Error("an unknown searchContextSize was accepted")
	}
}

// Parsing never panics, whatever the body.
func FuzzOpenAIParse(f *testing.F) {
	groundedASeed(f)
	f.Add([]byte(`{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"é [1] ([x](https://a.example/?utm_source=openai))","annotations":[{"type":"url_citation","start_index":-3,"end_index":999,"url":"https://a.example/?utm_source=openai"},{"type":"url_citation","start_index":5,"end_index":2,"url":"::bad"}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if r, err := engines.Normalize(engines.Config{Kind: "openai"}, engines.Query{Query: "q"}, body); err == nil {
			enginetest.CheckInvariants(t, r)
		}
	})
}
