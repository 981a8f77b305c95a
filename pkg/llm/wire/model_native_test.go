package wire_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// nativeAnswer renders r as the chain's Chat message and reads back its text and its
// native-search report.
func nativeAnswer(t *testing.T, r *wire.Response) (string, *llm.NativeSearch) {
	t.Helper()
	msg, _, _ := wire.ChatAnswer(r)
	var m struct {
		Content string            `json:"content"`
		Native  *llm.NativeSearch `json:"searchfleet_native"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatal(err)
	}
	if m.Native == nil {
		t.Fatalf("no native-search report in %s", clipped(string(msg)))
	}
	return m.Content, m.Native
}

var markerRE = regexp.MustCompile(`\[\d+\]`)

// wantMarked checks that each snippet (the text before a marker run, then the run) is
// in the marked text, and that the text without its markers is the answer's text.
func wantMarked(t *testing.T, name, marked, text string, snippets ...string) {
	t.Helper()
	for _, s := range snippets {
		if !strings.Contains(marked, s) {
			t.Errorf("%s: the marked answer has no %q", name, s)
		}
	}
	if got := markerRE.ReplaceAllString(marked, ""); got != markerRE.ReplaceAllString(text, "") {
		t.Errorf("%s: the marked answer changed the text:\n%q\n%q", name, clipped(got), clipped(text))
	}
}

func sourceURLs(n *llm.NativeSearch) []string {
	var out []string
	for _, s := range n.Sources {
		out = append(out, s.URL)
	}
	return out
}

// A recorded Responses answer with OpenAI's own search: each url_citation (code point
// offsets over text with — “ ’) becomes an [n] marker right after the cited markdown
// link, numbered by first citation (a page cited again keeps its number); the report
// lists each web_search_call (search, open_page, find_in_page) with what it found,
// three billed calls, and the seven cited pages in marker order.
func TestResponsesNativeSearchMarkers(t *testing.T) {
	t.Parallel()
	r, err := responses.Model.DecodeResponse(fixtures.Read("openai/vercel-responses-web-search-gpt5mini.json"))
	if err != nil {
		t.Fatal(err)
	}
	marked, n := nativeAnswer(t, r)
	wantMarked(t, "gpt-5-mini", marked, r.Text(),
		"openai-chatgpt-code-red-vergecast))[1]  \n",
		"december-5-2025/))[2]  \n",
		"11862701?utm_source=openai))[3]",
		"vercel.com/blog/series-f))[4]  \n",
		"cve-2025-49826/?utm_source=openai))[5]\n\n",
		"the-big-interview-2025-recap))[6]",
		"latest-ai-funding-round))[7]",
		"vercel.com/blog/series-f))[4]\n\n")
	if got := strings.Count(marked, "[1]"); got != 2 {
		t.Errorf("the page cited twice has %d markers [1], want 2", got)
	}
	want := []string{"https://www.theverge.com/podcast/838932/openai-chatgpt-code-red-vergecast",
		"https://techstartups.com/2025/12/05/technology-news-today-the-latest-in-tech-ai-startup-news-december-5-2025/",
		"https://www.investopedia.com/5-things-to-know-before-the-stock-market-opens-december-5-2025-11862701?utm_source=openai",
		"https://vercel.com/blog/series-f",
		"https://www.sentinelone.com/vulnerability-database/cve-2025-49826/?utm_source=openai",
		"https://www.wired.com/story/the-big-interview-2025-recap",
		"https://www.bloomberg.com/news/articles/2025-09-30/vercel-notches-9-3-billion-valuation-in-latest-ai-funding-round"}
	if got := sourceURLs(n); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("sources %v\nwant %v", got, want)
	}
	if n.Sources[0].Title != "Why OpenAI declared a code red for ChatGPT | The Verge" {
		t.Errorf("first source title %q", n.Sources[0].Title)
	}
	if n.Requests != 3 || len(n.Searches) != 3 {
		t.Fatalf("requests %d, searches %+v", n.Requests, n.Searches)
	}
	q := n.Searches
	if q[0].Query != "tech news today December 5 2025" || len(q[0].URLs) != 16 || q[0].Error != "" ||
		!strings.HasPrefix(q[1].Query, "open_page https://www.theverge.com/") || len(q[1].URLs) != 1 ||
		!strings.HasPrefix(q[2].Query, `find_in_page "Vercel" in https://`) {
		t.Errorf("searches %+v", q)
	}

	// A call still searching when the answer ended (Azure's preview tool) is reported
	// but not billed; a failed one is a failed search.
	r, err = responses.Model.DecodeResponse([]byte(`{"object":"response","status":"completed","output":[
		{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","queries":["nats jetstream 2.12"]}},
		{"type":"web_search_call","id":"ws_2","status":"failed","action":{"type":"search","query":"nats news"}},
		{"type":"web_search_call","id":"ws_3","status":"searching","action":{"type":"search","query":"jetstream"}},
		{"type":"message","content":[{"type":"output_text","text":"Ünïcode first. NATS 2.12 ([nats.io](https://nats.io/2-12))","annotations":[{"type":"url_citation","url":"https://nats.io/2-12","title":"NATS 2.12","start_index":25,"end_index":58}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	marked, n = nativeAnswer(t, r)
	if marked != "Ünïcode first. NATS 2.12 ([nats.io](https://nats.io/2-12))[1]" {
		t.Errorf("marked %q", marked)
	}
	if n.Requests != 1 || len(n.Searches) != 3 || n.Searches[0].Query != "nats jetstream 2.12" || n.Searches[1].Error == "" || n.Searches[2].Error != "" {
		t.Errorf("report %+v", n)
	}
}

// The recorded Responses stream with OpenAI's own search: the deltas are the answer's
// text; the finished answer carries the citation (announced by
// response.output_text.annotation.added) as a marker and both searches, as does a
// stream whose response.completed lists no output (the items come from
// response.output_item.done, the citation from the annotation event).
func TestResponsesNativeSearchStream(t *testing.T) {
	t.Parallel()
	data := fixtures.Read("openai/pydantic-responses-raw-annotations-stream.sse")
	check := func(name string, data []byte) {
		deltas, r := decodeStream(t, responses.Model, data, false)
		marked, n := nativeAnswer(t, r)
		wantMarked(t, name, marked, deltas, "(3,747 m / 12,294 ft). ([britannica.com](https://www.britannica.com/place/Mount-Columbia?utm_source=openai))[1]")
		if n.Requests != 2 || len(n.Searches) != 2 || n.Searches[0].Query != "tallest mountain in Alberta highest peak Alberta Mount Columbia elevation" ||
			len(n.Sources) != 1 || n.Sources[0].Title != "Mount Columbia | mountain, Alberta, Canada | Britannica" {
			t.Errorf("%s: report %+v", name, n)
		}
	}
	check("recorded", data)
	// The same stream, its final response stripped of its output and the done
	// message item stripped of its annotations.
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "data: "); ok {
			var ev map[string]any
			if json.Unmarshal([]byte(rest), &ev) == nil {
				switch ev["type"] {
				case "response.completed":
					ev["response"].(map[string]any)["output"] = []any{}
				case "response.output_item.done":
					if it := ev["item"].(map[string]any); it["type"] == "message" {
						it["content"].([]any)[0].(map[string]any)["annotations"] = []any{}
					}
				}
				nb, _ := json.Marshal(ev)
				line = "data: " + string(nb) + "\n"
			}
		}
		b.WriteString(line)
	}
	check("items from the stream", []byte(b.String()))
}

// The request carries OpenAI's web_search tool (with the request's settings) next to
// the client's function tools, and asks for each search's sources.
func TestResponsesNativeSearchRequest(t *testing.T) {
	t.Parallel()
	req, err := openaichat.Client.DecodeRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"Search the web for the latest news about NATS JetStream"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Search = &llm.SearchOptions{Requested: true, AllowedDomains: []string{"nats.io"}, Country: "DE"}
	body, err := responses.Model.EncodeRequest(req, "gpt-5")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Tools   []map[string]any `json:"tools"`
		Include []string         `json:"include"`
	}
	json.Unmarshal(body, &out)
	if len(out.Tools) != 2 || out.Tools[0]["type"] != "web_search" || out.Tools[1]["type"] != "function" ||
		js(out.Tools[0]["filters"]) != `{"allowed_domains":["nats.io"]}` || js(out.Tools[0]["user_location"]) != `{"country":"DE","type":"approximate"}` ||
		len(out.Include) != 1 || out.Include[0] != "web_search_call.action.sources" {
		t.Errorf("request %s", body)
	}
}

// Recorded Gemini answers grounded with Google Search: each grounding support's
// segment end (a UTF-8 byte offset, over text with '°') gets the markers of the
// chunks it cites, numbered by first citation; the report has the query, the grounded
// pages as what it found, one billed request, and the cited pages in marker order.
func TestGeminiNativeSearchMarkers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fixture  string
		query    string
		titles   []string
		snippets []string
	}{
		{"gemini/pydantic-generate-websearch-sf.response.json", "weather in San Francisco today",
			[]string{"Weather information for San Francisco, CA, US", "weather.gov", "wunderground.com"},
			[]string{"hovering around 69°F.[1] There", "throughout the day.[1]\n\n", "to the lower 80s.[2] Winds", "west at 10 to 15 mph.[3]\n\n", "to the upper 50s.[2] There", "remains low at 20%.[1]\n\n"}},
		{"gemini/pydantic-generate-websearch-mexico-2.response.json", "weather in Mexico City today",
			[]string{"wunderground.com", "wunderground.com", "yahoo.com", "theweathernetwork.com"},
			[]string{"particularly this afternoon.[1] ", "feels like 77°F (25°C).[2] ", "75°F (23°C to 24°C).[1][2][3] ", "about 57°F (14°C).[1][2][3]\n\n", "afternoon and evening.[4] ", "at 10 to 15 mph.[1][2]"}},
		// The first segment has no startIndex (proto3 zero omitted).
		{"gemini/firebase-googleai-grounding-london.json", "current weather in London",
			[]string{"accuweather.com", "Weather information for locality: London"},
			[]string{"Kingdom is cloudy.[1] ", "feels like 75°F (24°C).[2] ", "humidity is around 41%.[2]\n"}},
	} {
		r, err := gemini.Model.DecodeResponse(fixtures.Read(c.fixture))
		if err != nil {
			t.Fatal(err)
		}
		marked, n := nativeAnswer(t, r)
		wantMarked(t, c.fixture, marked, r.Text(), c.snippets...)
		var titles []string
		for _, s := range n.Sources {
			titles = append(titles, s.Title)
		}
		if strings.Join(titles, "|") != strings.Join(c.titles, "|") || n.Requests != 1 || len(n.Searches) != 1 || n.Searches[0].Query != c.query || len(n.Searches[0].URLs) != len(c.titles) {
			t.Errorf("%s: report %+v", c.fixture, n)
		}
	}
}

// Gemini 3 bills grounding per query it ran, $14 per 1,000 (empty queries not
// billed), where 2.x bills the grounded prompt, $35 per 1,000: the recorded 2.5 answer
// as Gemini 3 would send it (its modelVersion, three queries, one of them empty) is
// two billed requests at 0.014; as recorded, one at 0.035.
func TestGemini3BillsQueries(t *testing.T) {
	t.Parallel()
	rec := fixtures.Read("gemini/pydantic-generate-websearch-sf.response.json")
	var doc map[string]any
	if err := json.Unmarshal(rec, &doc); err != nil {
		t.Fatal(err)
	}
	doc["modelVersion"] = "gemini-3-flash-preview"
	gm := doc["candidates"].([]any)[0].(map[string]any)["groundingMetadata"].(map[string]any)
	gm["webSearchQueries"] = []any{"weather in San Francisco today", "", "San Francisco forecast"}
	g3, _ := json.Marshal(doc)
	for _, c := range []struct {
		name     string
		body     []byte
		model    string
		requests int
		price    float64
	}{
		{"gemini 2.5 as recorded", rec, "gemini-2.5-pro", 1, 0.035},
		{"gemini 3", g3, "gemini-3-flash-preview", 2, 0.014},
	} {
		r, err := gemini.Model.DecodeResponse(c.body)
		if err != nil {
			t.Fatal(err)
		}
		_, n := nativeAnswer(t, r)
		_, price, ok := gemini.Model.NativeSearch(r.Model)
		if n.Requests != c.requests || r.Model != c.model || !ok || price != c.price {
			t.Errorf("%s: model %q, %d billed requests at %v; want %d at %v", c.name, r.Model, n.Requests, price, c.requests, c.price)
		}
	}
}

// The recorded Gemini stream grounded with Google Search: the text goes out as it
// comes (the deltas are the answer without markers); the grounding on the last chunk
// (offsets into the whole streamed text) places the markers in the finished answer.
func TestGeminiNativeSearchStream(t *testing.T) {
	t.Parallel()
	deltas, r := decodeStream(t, gemini.Model, fixtures.Read("gemini/pydantic-stream-websearch-sf.sse"), false)
	marked, n := nativeAnswer(t, r)
	wantMarked(t, "stream", marked, deltas, "approximately 68%.[1] A", "with passing clouds.[2] T", "to the lower 80s.[3] S",
		"reach up to 85°F.[4] T", "in the upper 50s.[3]\n\n", "down in the evening.[5][2] T", "throughout the day.[1]")
	if deltas != r.Text() || n.Requests != 1 || len(n.Sources) != 5 || n.Sources[4].Title != "accuweather.com" || n.Searches[0].Query != "weather in San Francisco today" {
		t.Errorf("report %+v", n)
	}
}

// A Gemini answer that did not search has no report; one with grounding on text in
// several parts (partIndex) marks the part the segment names; the request carries
// googleSearch, which fits only a request without function tools.
func TestGeminiNativeSearchEdges(t *testing.T) {
	t.Parallel()
	r, err := gemini.Model.DecodeResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"hello"}]},"finishReason":"STOP","groundingMetadata":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if msg, _, _ := wire.ChatAnswer(r); strings.Contains(string(msg), llm.NativeKey) {
		t.Errorf("ungrounded answer %s", msg)
	}
	r, err = gemini.Model.DecodeResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"thinking","thought":true},{"text":"Première partie. "},{"text":"Zweite: größer."}]},"finishReason":"STOP",
		"groundingMetadata":{"webSearchQueries":["a","b"],"groundingChunks":[{"web":{"uri":"https://a.example","title":"a"}},{"web":{"uri":"https://b.example","title":"b"}}],
		"groundingSupports":[{"segment":{"partIndex":1,"endIndex":17},"groundingChunkIndices":[1]},{"segment":{"partIndex":2,"startIndex":0,"endIndex":17},"groundingChunkIndices":[0,1]}]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	marked, n := nativeAnswer(t, r)
	if marked != "Première partie.[1] Zweite: größer.[2][1]" || n.Requests != 1 || len(n.Searches) != 2 || sourceURLs(n)[0] != "https://b.example" {
		t.Errorf("marked %q report %+v", marked, n)
	}
	req, _ := openaichat.Client.DecodeRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"news?"}]}`))
	req.Search = &llm.SearchOptions{Requested: true}
	body, _ := gemini.Model.EncodeRequest(req, "gemini-2.5-flash")
	if !strings.Contains(string(body), `"tools":[{"googleSearch":{}}]`) {
		t.Errorf("request %s", body)
	}
	fit := wire.ModelAPI(gemini.Model).(wire.SearchFitter)
	if !fit.NativeSearchFits(req, "gemini-2.5-flash") || fit.NativeSearchFits(&wire.Request{Tools: []wire.Tool{{Name: "get_weather"}}}, "gemini-2.5-flash") {
		t.Error("googleSearch fits only a request without function tools")
	}
}

// A url_citation's span is read once, for main models and the openai engine alike: a
// span that misses the cited link (offsets not over the link) ends after the link
// found nearest to it, with OpenAI's tracking parameter or without; an empty span
// whose URL is nowhere in the text ends with the text.
func TestResponsesCitationSpans(t *testing.T) {
	t.Parallel()
	r, err := responses.Model.DecodeResponse([]byte(`{"object":"response","status":"completed","output":[
		{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"zürich weather"}},
		{"type":"message","content":[{"type":"output_text","text":"Zürich is mild ([meteo.example](https://meteo.example/zurich)). Rain later.","annotations":[
			{"type":"url_citation","url":"https://meteo.example/zurich?utm_source=openai","title":"Meteo","start_index":0,"end_index":5},
			{"type":"url_citation","url":"https://other.example/","title":"Other","start_index":0,"end_index":0}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	marked, _ := nativeAnswer(t, r)
	if want := "Zürich is mild ([meteo.example](https://meteo.example/zurich))[1]. Rain later.[2]"; marked != want {
		t.Errorf("marked %q, want %q", marked, want)
	}
	if got := responses.PageURL("https://meteo.example/zurich?utm_source=openai"); got != "https://meteo.example/zurich" {
		t.Errorf("page URL %q", got)
	}
}

// A Gemini thought summary is the model's reasoning, not its answer: it reads as a
// reasoning part (a Chat client gets it as reasoning_content, as DeepSeek sends it),
// never in the answer's text, and it is not sent back to the model on a later hop.
func TestGeminiThoughtSummaryIsReasoning(t *testing.T) {
	r, err := gemini.Model.DecodeResponse(fixtures.Read("gemini/docs-shape-thought-summary.CONSTRUCTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Content) != 2 || r.Content[0].Kind != wire.PartReasoning || r.Content[0].Reasoning.Protocol != wire.Gemini ||
		!strings.HasPrefix(r.Content[0].Reasoning.Text, "**Weighing the question**") {
		t.Fatalf("content %+v", r.Content)
	}
	if r.Text() != "The capital of Australia is Canberra." || r.Usage.OutputTokens != 8+214 {
		t.Errorf("text %q, output tokens %d", r.Text(), r.Usage.OutputTokens)
	}
	msg, finish := wire.TurnOf(r).ChatMessage()
	if msg["content"] != "The capital of Australia is Canberra." || !strings.Contains(fmt.Sprint(msg["reasoning_content"]), "Canberra, not Sydney") || finish != "stop" {
		t.Errorf("Chat message %v, finish %q", msg, finish)
	}
	next := &wire.Request{Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "Capital of Australia?"}}},
		{Role: wire.RoleAssistant, Parts: wire.TurnOf(r).Parts}, {Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "And of Canada?"}}}}}
	out, err := gemini.Model.EncodeRequest(next, "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "Weighing") || strings.Contains(string(out), `"thought"`) {
		t.Errorf("the thought summary went back to the model: %s", out)
	}
}
