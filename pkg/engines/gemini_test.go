package engines_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
)

// geminiEmpty is a grounded answer in Gemini's real shape for a search that found
// nothing: the model answered, groundingMetadata is the empty object the stream
// recordings carry.
const geminiEmpty = `{"candidates":[{"content":{"parts":[{"text":"I could not find any web results for that query."}],"role":"model"},"finishReason":"STOP","index":0,"groundingMetadata":{}}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":11,"totalTokenCount":23},"modelVersion":"gemini-2.5-flash"}`

// geminiQueryOf reads the last user text of a generateContent request.
func geminiQueryOf(_ *http.Request, body []byte) string {
	var req struct {
		Contents []struct {
			Role  string
			Parts []struct{ Text string }
		}
	}
	json.Unmarshal(body, &req)
	for i := len(req.Contents) - 1; i >= 0; i-- {
		if c := req.Contents[i]; c.Role == "user" && len(c.Parts) > 0 {
			return c.Parts[0].Text
		}
	}
	return ""
}

func TestGeminiConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "gemini"},
		OK:     []enginetest.Response{enginetest.JSON("gemini/pydantic-generate-websearch-sf.response.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 3 {
				t.Fatalf("hits = %d, want 3", len(r.Hits))
			}
			if h := r.Hits[1]; h.Title != "weather.gov" || h.Source != "weather.gov" ||
				!strings.HasPrefix(h.URL, "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQF_uqo2G5") {
				t.Errorf("hit 2 = %+v", h)
			}
			// The literal google.com/search URI with spaces is escaped, not dropped.
			if got := r.Hits[0].URL; got != "https://www.google.com/search?q=weather+in+San%20Francisco,%20CA,+US" {
				t.Errorf("hit 1 URL = %q", got)
			}
			enginetest.MarkerAfter(t, r.Summary, "temperatures hovering around 69°F.", "[1]")
			enginetest.MarkerAfter(t, r.Summary, "very low chance of rain throughout the day.", "[1]")
			enginetest.MarkerAfter(t, r.Summary, "from the mid-60s to the lower 80s.", "[2]")
			enginetest.MarkerAfter(t, r.Summary, "from the west at 10 to 15 mph.", "[3]")
			enginetest.MarkerAfter(t, r.Summary, "dropping to the upper 50s.", "[2]")
			enginetest.MarkerAfter(t, r.Summary, "it remains low at 20%.", "[1]")
			if n := len(engines.Markers(r.Summary)); n != 6 {
				t.Errorf("%d markers in the summary, want one per support (6)", n)
			}
			if !strings.Contains(r.Citation.LLMContent, "[3] wunderground.com (https://vertexaisearch.cloud.google.com/") {
				t.Errorf("LLMContent lacks source 3:\n%s", r.Citation.LLMContent)
			}
			want := engines.Usage{Searches: 1, InputTokens: 17 + 119, OutputTokens: 201 + 213, CostUSD: 0.035}
			if r.Usage != want {
				t.Errorf("usage = %+v, want %+v", r.Usage, want)
			}
		},
		// Byte offsets: segment 57..123 holds two '°' (2 bytes each), so character
		// offsets would land 2-4 characters early.
		Unicode: []enginetest.Response{enginetest.JSON("gemini/firebase-googleai-grounding-london.json")},
		CheckUnicode: func(t *testing.T, r *engines.Result) {
			enginetest.MarkerAfter(t, r.Summary, "United Kingdom is cloudy.", "[1]") // no startIndex
			enginetest.MarkerAfter(t, r.Summary, "but it feels like 75°F (24°C).", "[2]")
			enginetest.MarkerAfter(t, r.Summary, "the humidity is around 41%.", "[2]")
		},
		Empty:          []enginetest.Response{{Body: []byte(geminiEmpty)}},
		RateLimited:    enginetest.Status(429, "gemini/vercel-429-retry-info.json"),
		WantRetryAfter: 34400 * time.Millisecond, // google.rpc.RetryInfo "34.4s" in the body
		AuthError:      enginetest.Status(403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.","status":"PERMISSION_DENIED"}}`),
		QueryOf:        geminiQueryOf,
		KeyOf:          func(r *http.Request) string { return r.Header.Get("X-Goog-Api-Key") },
	})
}

// Vertex AI: the same body under the project/location path, with a bearer token.
func TestGeminiVertexConformance(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Suite{
		Config: engines.Config{Kind: "gemini", Options: json.RawMessage(`{"vertex":{"project":"my-proj"}}`)},
		OK:     []enginetest.Response{enginetest.JSON("gemini/firebase-vertexai-grounding-london.json")},
		CheckOK: func(t *testing.T, r *engines.Result) {
			if len(r.Hits) != 2 || r.Hits[0].Title != "accuweather.com" || r.Hits[1].URL != "https://www.google.com/search?q=weather+in+London" {
				t.Errorf("hits = %+v", r.Hits)
			}
			enginetest.MarkerAfter(t, r.Summary, "The temperature is 67°F (19°C), but it feels like 75°F (24°C).", "[2]")
		},
		Empty:       []enginetest.Response{{Body: []byte(geminiEmpty)}},
		RateLimited: enginetest.Status(429, "gemini/firebase-vertex-429-quota-exceeded.json"),
		QueryOf:     geminiQueryOf,
		KeyOf:       func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") },
	})
}

func TestGeminiVertexRequest(t *testing.T) {
	t.Parallel()
	cfg := engines.Config{Kind: "gemini", Model: "gemini-2.5-pro", Options: json.RawMessage(`{"vertex":{"project":"proj-1","location":"europe-west4"}}`)}
	res, reqs := enginetest.Search(t, cfg, engines.Query{Query: "weather in London", Recency: engines.OneWeek},
		enginetest.JSON("gemini/firebase-vertexai-grounding-london.json"))
	// Recency cannot be set on googleSearch: it is asked of the model, and the result
	// says it was only applied afterwards.
	var sent struct {
		SystemInstruction struct{ Parts []struct{ Text string } } `json:"systemInstruction"`
	}
	json.Unmarshal(reqs[0].Body, &sent)
	if !strings.Contains(sent.SystemInstruction.Parts[0].Text, "published in the last week") {
		t.Errorf("system instruction = %+v", sent.SystemInstruction)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "recency oneWeek is not supported") {
		t.Errorf("warnings = %v", res.Warnings)
	}
	if got, want := reqs[0].Path, "/v1/projects/proj-1/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent"; got != want {
		t.Errorf("path = %s, want %s", got, want)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-test-key" {
		t.Errorf("Authorization = %q", got)
	}
	if got := reqs[0].Header.Get("X-Goog-Api-Key"); got != "" {
		t.Errorf("Vertex request carries x-goog-api-key %q", got)
	}
}

// The outgoing request has the shape of the recorded pydantic-ai requests: one user
// content with the query, a system instruction, and exactly [{"googleSearch":{}}].
func TestGeminiRequestMatchesRecordings(t *testing.T) {
	t.Parallel()
	res, reqs := enginetest.Search(t, engines.Config{Kind: "gemini"}, engines.Query{Query: "What is the weather in San Francisco today?"},
		enginetest.JSON("gemini/pydantic-generate-websearch-sf.response.json"))
	if len(res.Hits) == 0 {
		t.Fatal("no hits")
	}
	if got, want := reqs[0].Path, "/v1beta/models/gemini-2.5-flash:generateContent"; got != want {
		t.Errorf("path = %s, want %s", got, want)
	}
	if got := reqs[0].Header.Get("X-Goog-Api-Key"); got != "sk-test-key" {
		t.Errorf("x-goog-api-key = %q", got)
	}
	if strings.Contains(reqs[0].Path, "key=") {
		t.Error("the key must not travel in the URL")
	}
	type shape struct {
		Contents []struct {
			Role  string            `json:"role"`
			Parts []json.RawMessage `json:"parts"`
		} `json:"contents"`
		SystemInstruction struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Tools []json.RawMessage `json:"tools"`
	}
	var sent shape
	if err := json.Unmarshal(reqs[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{
		"gemini/pydantic-generate-websearch-sf.request.json",
		"gemini/pydantic-stream-websearch-sf.request.json",
		"gemini/pydantic-generate-websearch-mexico.request.json",
	} {
		var rec shape
		if err := json.Unmarshal(fixtures.Read(f), &rec); err != nil {
			t.Fatal(err)
		}
		if len(sent.Tools) != len(rec.Tools) || !groundedAJSONEqual(sent.Tools[0], rec.Tools[0]) {
			t.Errorf("%s: tools = %s, recorded %s", f, sent.Tools, rec.Tools)
		}
		if sent.Contents[0].Role != rec.Contents[0].Role || len(sent.Contents[0].Parts) != len(rec.Contents[0].Parts) {
			t.Errorf("%s: first content = %+v, recorded %+v", f, sent.Contents[0], rec.Contents[0])
		}
		if !groundedAJSONEqual(sent.Contents[0].Parts[0], rec.Contents[0].Parts[0]) {
			t.Errorf("%s: user part = %s, recorded %s", f, sent.Contents[0].Parts[0], rec.Contents[0].Parts[0])
		}
		if len(sent.SystemInstruction.Parts) != 1 || sent.SystemInstruction.Parts[0].Text == "" || len(rec.SystemInstruction.Parts) != 1 {
			t.Errorf("%s: systemInstruction = %+v", f, sent.SystemInstruction)
		}
	}
	if len(sent.Contents) != 1 {
		t.Errorf("a search is one user turn; sent %d contents", len(sent.Contents))
	}
}

// groundedAGlob lists the fixtures in dir whose names start with prefix and end with
// suffix.
func groundedAGlob(dir, prefix, suffix string) ([]string, error) {
	return fs.Glob(fixtures.FS(), dir+"/"+prefix+"*"+suffix)
}

func groundedAJSONEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func geminiNormalize(t *testing.T, model string, body []byte) *engines.Result {
	t.Helper()
	r, err := engines.Normalize(engines.Config{Kind: "gemini", Model: model}, engines.Query{Query: "weather"}, body)
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	enginetest.CheckInvariants(t, r)
	return r
}

func TestGeminiMexicoFixtures(t *testing.T) {
	t.Parallel()
	r := geminiNormalize(t, "", fixtures.Read("gemini/pydantic-generate-websearch-mexico.response.json"))
	if len(r.Hits) != 3 || r.Hits[0].Title != "theweathernetwork.com" || r.Hits[2].Title != "wunderground.com" {
		t.Errorf("hits = %+v", r.Hits)
	}
	enginetest.MarkerAfter(t, r.Summary, "especially from mid-afternoon into the evening.", "[1][2][3]")
	enginetest.MarkerAfter(t, r.Summary, "from the north-northeast at 10 to 15 mph.", "[2][3]")
	if strings.Contains(r.Summary, "(around 17-18°C).[") {
		t.Error("an ungrounded sentence got a marker")
	}
	if r.Usage.InputTokens != 209+286 || r.Usage.OutputTokens != 206+131 {
		t.Errorf("usage = %+v", r.Usage)
	}

	r = geminiNormalize(t, "", fixtures.Read("gemini/pydantic-generate-websearch-mexico-2.response.json"))
	if len(r.Citation.Sources) != 4 || r.Citation.Sources[2].Web.Title != "yahoo.com" {
		t.Errorf("sources = %+v", r.Citation.Sources)
	}
	enginetest.MarkerAfter(t, r.Summary, "particularly this afternoon.", "[1]")
	enginetest.MarkerAfter(t, r.Summary, "but it feels like 77°F (25°C).", "[2]")
	enginetest.MarkerAfter(t, r.Summary, "(23°C to 24°C).", "[1][2][3]")
	enginetest.MarkerAfter(t, r.Summary, "a low of about 57°F (14°C).", "[1][2][3]")
	enginetest.MarkerAfter(t, r.Summary, "in the late afternoon and evening.", "[4]")
	enginetest.MarkerAfter(t, r.Summary, "at 10 to 15 mph.", "[1][2]")
}

// A candidate stopped for SAFETY that still carries text is an answer with a warning;
// without text it is a BadRequest the model can act on.
func TestGeminiFinishReasonSafety(t *testing.T) {
	t.Parallel()
	raw := fixtures.Read("gemini/firebase-finish-reason-safety.json")
	r := geminiNormalize(t, "", raw)
	if r.Summary != "Safety error incoming in 5, 4, 3, 2..." || len(r.Hits) != 0 {
		t.Errorf("summary = %q, hits = %d", r.Summary, len(r.Hits))
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "SAFETY") {
		t.Errorf("warnings = %v, want one naming SAFETY", r.Warnings)
	}

	var v map[string]any
	json.Unmarshal(raw, &v)
	v["candidates"].([]any)[0].(map[string]any)["content"] = map[string]any{"parts": []any{}, "role": "model"}
	noText, _ := json.Marshal(v)
	_, err := engines.Normalize(engines.Config{Kind: "gemini"}, engines.Query{Query: "q"}, noText)
	groundedAWantError(t, err, engines.BadRequest, "SAFETY")
}

func groundedAWantError(t *testing.T, err error, kind engines.ErrorKind, msg string) *engines.Error {
	t.Helper()
	var e *engines.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *engines.Error", err)
	}
	if e.Kind != kind || !strings.Contains(e.Message, msg) {
		t.Errorf("error = %v, want kind %s with %q", err, kind, msg)
	}
	return e
}

// groundedASSEData returns the data payloads of an SSE stream (LF or CRLF framing).
func groundedASSEData(b []byte) [][]byte {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 8<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			out = append(out, []byte(strings.TrimSpace(d)))
		}
	}
	return out
}

// The streamed recording: only the last chunk carries the grounding metadata, with
// byte offsets into the concatenation of every chunk's text. Assembled into one
// generateContent body, it parses like a non-streamed answer.
func TestGeminiStreamAssembled(t *testing.T) {
	t.Parallel()
	type chunk struct {
		Candidates []struct {
			Content struct {
				Parts []struct{ Text string } `json:"parts"`
			} `json:"content"`
			FinishReason      string          `json:"finishReason"`
			GroundingMetadata json.RawMessage `json:"groundingMetadata"`
		} `json:"candidates"`
		UsageMetadata json.RawMessage `json:"usageMetadata"`
	}
	var text strings.Builder
	var last chunk
	frames := groundedASSEData(fixtures.Read("gemini/pydantic-stream-websearch-sf.sse"))
	if len(frames) < 2 {
		t.Fatalf("%d frames", len(frames))
	}
	for _, f := range frames {
		var c chunk
		if err := json.Unmarshal(f, &c); err != nil {
			t.Fatalf("frame: %v", err)
		}
		for _, p := range c.Candidates[0].Content.Parts {
			text.WriteString(p.Text)
		}
		last = c
	}
	body, _ := json.Marshal(map[string]any{
		"candidates": []any{map[string]any{
			"content":           map[string]any{"role": "model", "parts": []any{map[string]any{"text": text.String()}}},
			"finishReason":      last.Candidates[0].FinishReason,
			"groundingMetadata": last.Candidates[0].GroundingMetadata,
		}},
		"usageMetadata": last.UsageMetadata,
	})
	r := geminiNormalize(t, "", body)
	if len(r.Hits) == 0 {
		t.Fatal("no hits from the assembled stream")
	}
	if n := len(engines.Markers(r.Summary)); n == 0 {
		t.Fatal("no markers from the assembled stream")
	}
	// Every support of the recording lands right after its own segment text.
	var meta struct {
		GroundingSupports []struct {
			Segment struct{ Text string } `json:"segment"`
		} `json:"groundingSupports"`
	}
	json.Unmarshal(last.Candidates[0].GroundingMetadata, &meta)
	if len(meta.GroundingSupports) != 8 {
		t.Fatalf("supports = %d, want the recorded 8", len(meta.GroundingSupports))
	}
	for _, s := range meta.GroundingSupports {
		i := strings.Index(r.Summary, s.Segment.Text)
		if i < 0 {
			t.Errorf("summary lost segment %q", s.Segment.Text)
			continue
		}
		if rest := r.Summary[i+len(s.Segment.Text):]; !strings.HasPrefix(rest, "[") {
			t.Errorf("no marker right after %q (next: %.12q)", s.Segment.Text, rest)
		}
	}
	enginetest.MarkerAfter(t, r.Summary, "the temperature is around 69°F (21°C), with a real feel of about 76°F (24°C) and humidity at approximately 68%.", "[")
}

// The blocked-prompt stream: promptFeedback.blockReason SAFETY and no candidates.
func TestGeminiPromptBlocked(t *testing.T) {
	t.Parallel()
	frames := groundedASSEData(fixtures.Read("gemini/firebase-stream-prompt-blocked-safety.sse"))
	if len(frames) != 1 {
		t.Fatalf("%d frames", len(frames))
	}
	_, err := engines.Normalize(engines.Config{Kind: "gemini"}, engines.Query{Query: "q"}, frames[0])
	groundedAWantError(t, err, engines.BadRequest, "blocked the query (SAFETY)")

	// The same answer over HTTP is a BadRequest too, never a retry.
	_, err, _ = enginetest.Do(t, engines.Config{Kind: "gemini"}, engines.Query{Query: "q"}, enginetest.Response{Body: frames[0]})
	groundedAWantError(t, err, engines.BadRequest, "SAFETY")
}

func TestGeminiErrors(t *testing.T) {
	t.Parallel()
	q := engines.Query{Query: "q"}
	_, err, _ := enginetest.Do(t, engines.Config{Kind: "gemini"}, q, enginetest.Status(429, "gemini/firebase-vertex-429-quota-exceeded.json"))
	e := groundedAWantError(t, err, engines.RateLimited, "Quota exceeded for quota metric")
	if e.Status != 429 || e.RetryAfter != 0 {
		t.Errorf("status %d retryAfter %s", e.Status, e.RetryAfter)
	}
	_, err, _ = enginetest.Do(t, engines.Config{Kind: "gemini"}, q, enginetest.Status(429, "gemini/vercel-429-retry-info.json"))
	e = groundedAWantError(t, err, engines.RateLimited, "You exceeded your current quota")
	if e.RetryAfter != 34400*time.Millisecond {
		t.Errorf("RetryAfter = %s, want 34.4s", e.RetryAfter)
	}
	// A wrong key is a 400 INVALID_ARGUMENT on the Developer API: still an auth failure.
	_, err, _ = enginetest.Do(t, engines.Config{Kind: "gemini"}, q, enginetest.Status(400,
		`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`))
	groundedAWantError(t, err, engines.Auth, "API key not valid")
	_, err, _ = enginetest.Do(t, engines.Config{Kind: "gemini"}, q, enginetest.Status(400,
		`{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}`))
	groundedAWantError(t, err, engines.BadRequest, "invalid argument")
	// An error envelope that arrives with 200 is not a result.
	_, err = engines.Normalize(engines.Config{Kind: "gemini"}, q, []byte(`{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}`))
	groundedAWantError(t, err, engines.BadRequest, "NOT_FOUND")
	_, err = engines.Normalize(engines.Config{Kind: "gemini"}, q, []byte(`{}`))
	groundedAWantError(t, err, engines.Decode, "no candidates")
	// A missing key fails before any call.
	reg, err := engines.FromConfig([]engines.Config{{ID: "g", Kind: "gemini", APIKeyEnv: "SEARCHFLEET_TEST_UNSET_GEMINI_KEY"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := reg.Get("g")
	_, err = eng.Search(t.Context(), q)
	groundedAWantError(t, err, engines.Auth, "SEARCHFLEET_TEST_UNSET_GEMINI_KEY")
}

// Offsets that do not match the segment text fall back to finding the text; an empty
// {} chunk keeps the numbering aligned and loses its marker; thought parts are not
// part of the answer; a "[1]" the model wrote itself is not taken for a citation.
func TestGeminiSupportEdgeCases(t *testing.T) {
	t.Parallel()
	body := `{"candidates":[{"content":{"role":"model","parts":[
		{"text":"Planning the search…","thought":true},
		{"text":"Rain is likely today [1] in Zürich. Winds are calm."}]},
	  "finishReason":"STOP",
	  "groundingMetadata":{
		"webSearchQueries":["zürich weather",""],
		"groundingChunks":[{},{"web":{"uri":"https://example.com/zh","title":"example.com"}},{"web":{"uri":"https://meteo.example.org/","title":"MeteoSwiss"}}],
		"groundingSupports":[
		  {"segment":{"startIndex":3,"endIndex":9,"text":"Rain is likely today [1] in Zürich."},"groundingChunkIndices":[1,0]},
		  {"segment":{"startIndex":37,"endIndex":52,"text":"Winds are calm."},"groundingChunkIndices":[2,7]},
		  {"segment":{"endIndex":4,"text":"Rain"},"groundingChunkIndices":[0]}]}}]}`
	r := geminiNormalize(t, "", []byte(body))
	if strings.Contains(r.Summary, "Planning") {
		t.Errorf("thought text leaked into the summary: %q", r.Summary)
	}
	enginetest.MarkerAfter(t, r.Summary, `Rain is likely today \[1\] in Zürich.`, "[1]")
	enginetest.MarkerAfter(t, r.Summary, "Winds are calm.", "[2]")
	if strings.HasPrefix(r.Summary, "Rain[") {
		t.Errorf("marker of the empty chunk survived: %q", r.Summary)
	}
	if len(r.Citation.Sources) != 2 || r.Citation.Sources[0].Web.URI != "https://example.com/zh" {
		t.Errorf("sources = %+v", r.Citation.Sources)
	}
	if len(r.Hits) != 2 || r.Hits[0].Source != "example.com" || r.Hits[1].Source != "meteo.example.org" {
		t.Errorf("hits = %+v", r.Hits)
	}
	if r.Usage.Searches != 1 || r.Usage.CostUSD != 0.035 {
		t.Errorf("usage = %+v", r.Usage)
	}

	// Gemini 3 bills per executed (non-empty) query.
	r = geminiNormalize(t, "gemini-3-flash-preview", []byte(strings.Replace(body, `"zürich weather",""`, `"zürich weather","","zürich wind"`, 1)))
	if r.Usage.Searches != 2 || r.Usage.CostUSD != 2*0.014 {
		t.Errorf("gemini-3 usage = %+v", r.Usage)
	}
}

// groundedASeed adds every recorded file of the gemini, openai and anthropic fixture
// directories to a fuzz corpus: each kind must survive the others' bodies too.
func groundedASeed(f *testing.F) {
	for _, dir := range []string{"gemini", "openai", "anthropic"} {
		files, err := groundedAGlob(dir, "", "")
		if err != nil || len(files) == 0 {
			f.Fatalf("no fixtures in %s: %v", dir, err)
		}
		for _, name := range files {
			f.Add(fixtures.Read(name))
		}
	}
}

// Parsing never panics, whatever the body.
func FuzzGeminiParse(f *testing.F) {
	groundedASeed(f)
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"é[1]"},{"text":"x","thought":true}]},"groundingMetadata":{"groundingChunks":[{"web":{"uri":"https://a.example/","title":"a"}},{}],"groundingSupports":[{"segment":{"partIndex":7,"startIndex":-5,"endIndex":99999,"text":"zz"},"groundingChunkIndices":[-1,0,5]},{"segment":{"partIndex":1,"endIndex":1},"groundingChunkIndices":[1]}]}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if r, err := engines.Normalize(engines.Config{Kind: "gemini"}, engines.Query{Query: "q"}, body); err == nil {
			enginetest.CheckInvariants(t, r)
		}
	})
}
