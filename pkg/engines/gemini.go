package engines

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// gemini is Google's Gemini generateContent API with Google Search grounding
// (tools: [{googleSearch: {}}]): the model searches, answers, and reports which sentences
// of its answer rest on which pages in groundingMetadata.
//
// Two deployments speak the same body:
//
//   - the Gemini Developer API (default): POST {base}/v1beta/models/{model}:generateContent
//     with the API key in the x-goog-api-key header (never in the URL, where it would end
//     up in access logs); default base https://generativelanguage.googleapis.com;
//   - Vertex AI, with options {"vertex": {"project": "p", "location": "us-central1"}}:
//     POST {base}/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent
//     with "Authorization: Bearer <token>", the key variable then holding an OAuth access
//     token; default base https://{location}-aiplatform.googleapis.com (the "global"
//     location is served by https://aiplatform.googleapis.com).
//
// The default model is gemini-2.5-flash, the cheapest model with search grounding.
//
// Pricing: Gemini 2.5 and older bill per grounded prompt ($35 per 1,000 beyond the free
// allotment), so the default cost is $0.035 per search that used grounding. Gemini 3
// models bill per executed search query instead ($14 per 1,000; empty strings in
// webSearchQueries are not billed), so for a gemini-3* model the default is $0.014 per
// query. CostPerSearchUSD overrides the unit price in either scheme.
//
// Filters: googleSearch has no domain, recency, count, language or country knob in the
// recorded requests, so every filter is left to the shared normalization (which applies
// domain and count filters afterwards and warns about the rest). A recency wish is
// still passed to the model as an instruction.
type gemini struct {
	client
	keyEnv   string
	model    string
	path     string // endpoint path, model included
	vertex   bool
	perQuery bool // Gemini 3 bills per search query, not per grounded prompt
	price    float64
}

// geminiOptions are the options of the gemini kind.
type geminiOptions struct {
	// Vertex switches to Vertex AI; nil means the Gemini Developer API.
	Vertex *geminiVertex `json:"vertex,omitempty"`
}

// geminiVertex locates a Vertex AI endpoint.
type geminiVertex struct {
	Project string `json:"project"`
	// Location is the Vertex region; empty means us-central1.
	Location string `json:"location,omitempty"`
}

var geminiNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func newGemini(cfg Config, hc *http.Client) (Engine, error) {
	var opts geminiOptions
	if err := cfg.options(&opts); err != nil {
		return nil, err
	}
	model := strings.TrimPrefix(strings.TrimSpace(cfg.Model), "models/")
	if model == "" {
		model = "gemini-2.5-flash"
	}
	if !geminiNameRE.MatchString(model) {
		return nil, fmt.Errorf("engine %q: model %q is not a Gemini model name", cfg.ID, model)
	}
	e := &gemini{keyEnv: cfg.APIKeyEnv, model: model, perQuery: strings.HasPrefix(model, "gemini-3")}
	defaultBase := "https://generativelanguage.googleapis.com"
	e.path = "/v1beta/models/" + model + ":generateContent"
	if v := opts.Vertex; v != nil {
		loc := v.Location
		if loc == "" {
			loc = "us-central1"
		}
		if !geminiNameRE.MatchString(v.Project) || !geminiNameRE.MatchString(loc) {
			return nil, fmt.Errorf("engine %q: options.vertex needs a project and a location made of letters, digits, '.', '_' or '-'", cfg.ID)
		}
		e.vertex = true
		defaultBase = "https://" + loc + "-aiplatform.googleapis.com"
		if loc == "global" {
			defaultBase = "https://aiplatform.googleapis.com"
		}
		e.path = "/v1/projects/" + url.PathEscape(v.Project) + "/locations/" + url.PathEscape(loc) +
			"/publishers/google/models/" + model + ":generateContent"
	}
	e.client = newClient(cfg, hc, defaultBase)
	if e.perQuery {
		e.price = cfg.price(0.014)
	} else {
		e.price = cfg.price(0.035)
	}
	return e, nil
}

func (e *gemini) Name() string { return e.id }

// Capabilities: none; see the type's comment.
func (e *gemini) Capabilities() Capabilities { return Capabilities{} }

type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction,omitempty"`
	Tools             []geminiTool    `json:"tools"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text string `json:"text"`
}

type geminiTool struct {
	GoogleSearch *struct{} `json:"googleSearch,omitempty"`
}

type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text    string `json:"text"`
				Thought bool   `json:"thought"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason      string `json:"finishReason"`
		GroundingMetadata *struct {
			WebSearchQueries []string `json:"webSearchQueries"`
			GroundingChunks  []struct {
				Web *struct {
					URI   string `json:"uri"`
					Title string `json:"title"`
				} `json:"web"`
			} `json:"groundingChunks"`
			GroundingSupports []geminiSupport `json:"groundingSupports"`
		} `json:"groundingMetadata"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
	UsageMetadata struct {
		PromptTokenCount        int `json:"promptTokenCount"`
		CandidatesTokenCount    int `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
	} `json:"usageMetadata"`
	// Error is an error envelope that arrived with a 2xx status (proxies do that).
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

type geminiSupport struct {
	Segment struct {
		PartIndex  *int   `json:"partIndex"`
		StartIndex int    `json:"startIndex"` // omitted when 0 (proto3)
		EndIndex   int    `json:"endIndex"`
		Text       string `json:"text"`
	} `json:"segment"`
	GroundingChunkIndices []int `json:"groundingChunkIndices"`
}

func (e *gemini) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, missingKey(Config{ID: e.id, APIKeyEnv: e.keyEnv})
	}
	req := geminiRequest{
		Contents:          []geminiContent{{Role: "user", Parts: []geminiPart{{Text: q.Query}}}},
		SystemInstruction: &geminiContent{Parts: []geminiPart{{Text: groundedAInstructions(q)}}},
		Tools:             []geminiTool{{GoogleSearch: &struct{}{}}},
	}
	h := header("x-goog-api-key", e.key)
	if e.vertex {
		h = bearer(e.key)
	}
	body, _, err := e.do(ctx, request{path: e.path, header: h, body: req})
	if err != nil {
		// The Developer API answers a wrong key with 400 INVALID_ARGUMENT
		// (reason API_KEY_INVALID); that is an auth failure, not a bad query.
		var ee *Error
		if errors.As(err, &ee) && ee.Kind == BadRequest &&
			(strings.Contains(ee.Message, "API key not valid") || strings.Contains(ee.Message, "API_KEY_INVALID")) {
			ee.Kind = Auth
		}
		return nil, err
	}
	return e.parse(q, [][]byte{body})
}

func (e *gemini) parse(_ Query, bodies [][]byte) (*Result, error) {
	if len(bodies) == 0 {
		return nil, &Error{Kind: Decode, Engine: e.id, Message: "no response body"}
	}
	var resp geminiResponse
	if err := e.decode(bodies[0], &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, &Error{Kind: BadRequest, Engine: e.id,
			Message: e.redact(truncate(fmt.Sprintf("%s (%d): %s", resp.Error.Status, resp.Error.Code, resp.Error.Message), 300))}
	}
	if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" {
		msg := "Gemini blocked the query (" + pf.BlockReason + ")"
		if pf.BlockReasonMessage != "" {
			msg += ": " + pf.BlockReasonMessage
		}
		return nil, &Error{Kind: BadRequest, Engine: e.id, Message: msg}
	}
	if len(resp.Candidates) == 0 {
		return nil, &Error{Kind: Decode, Engine: e.id, Message: "response has no candidates"}
	}
	cand := resp.Candidates[0]

	// The answer is the concatenation of the non-thought text parts; partBase maps a
	// part index to where that part starts in it (-1 for parts that are not in it).
	var text strings.Builder
	partBase := make([]int, len(cand.Content.Parts))
	for i, p := range cand.Content.Parts {
		partBase[i] = -1
		if p.Thought {
			continue
		}
		partBase[i] = text.Len()
		text.WriteString(p.Text)
	}
	answer := text.String()

	res := &Result{}
	switch cand.FinishReason {
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		if strings.TrimSpace(answer) == "" {
			return nil, &Error{Kind: BadRequest, Engine: e.id,
				Message: "Gemini withheld the answer (finish reason " + cand.FinishReason + "); rephrase the query"}
		}
		res.warnf("Gemini stopped the answer early (finish reason %s); it may be incomplete", cand.FinishReason)
	case "MAX_TOKENS":
		res.warnf("Gemini's answer was cut off at its token limit")
	}

	u := resp.UsageMetadata
	res.Usage = Usage{
		InputTokens:  u.PromptTokenCount + u.ToolUsePromptTokenCount,
		OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
	}
	gm := cand.GroundingMetadata
	if gm == nil {
		res.Summary = answer
		return res, nil
	}
	for _, wq := range gm.WebSearchQueries {
		if strings.TrimSpace(wq) != "" {
			res.Usage.Searches++
		}
	}
	switch {
	case e.perQuery:
		res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	case res.Usage.Searches > 0 || len(gm.GroundingChunks) > 0:
		res.Usage.CostUSD = e.price
	}

	// Sources stay aligned with chunk indices, so a chunk without a web page (an empty
	// {} chunk) becomes a source with no URI: finish drops it and its markers.
	seen := make(map[string]bool, len(gm.GroundingChunks))
	res.Citation.Sources = make([]Source, len(gm.GroundingChunks))
	for i, c := range gm.GroundingChunks {
		if c.Web == nil {
			continue
		}
		res.Citation.Sources[i] = Source{Web: Web{Title: c.Web.Title, URI: c.Web.URI}}
		if c.Web.URI == "" || seen[c.Web.URI] {
			continue
		}
		seen[c.Web.URI] = true
		h := Hit{Title: c.Web.Title, URL: c.Web.URI}
		// Titles are usually the publisher's bare domain ("weather.gov") while the URI
		// is a vertexaisearch.cloud.google.com redirect: the title names the site.
		if t := strings.TrimSpace(c.Web.Title); t != "" && !strings.ContainsAny(t, " /") && strings.Contains(t, ".") {
			h.Source = strings.ToLower(strings.TrimPrefix(t, "www."))
		}
		res.Hits = append(res.Hits, h)
	}

	byEnd := map[int][]int{}
	var ends []int
	for _, s := range gm.GroundingSupports {
		var nums []int
		for _, ci := range s.GroundingChunkIndices {
			if ci >= 0 && ci < len(gm.GroundingChunks) {
				nums = append(nums, ci+1)
			}
		}
		if len(nums) == 0 {
			continue
		}
		end := geminiSegmentEnd(answer, partBase, s)
		if _, ok := byEnd[end]; !ok {
			ends = append(ends, end)
		}
		byEnd[end] = append(byEnd[end], nums...)
	}
	ins := make([]Insert, 0, len(ends))
	for _, end := range ends {
		ins = append(ins, Insert{Offset: end, Text: MarkerText(byEnd[end])})
	}
	res.Summary = groundedAInsert(answer, ins)
	return res, nil
}

// geminiSegmentEnd returns the byte offset in text where a support's marker goes: the
// segment's endIndex when text[startIndex:endIndex] is the segment's text (offsets are
// UTF-8 bytes, relative to the whole answer or, when partIndex is set, possibly to that
// part), else the end of the occurrence of the segment's text nearest to endIndex, else
// endIndex as given (clamped to the text).
func geminiSegmentEnd(text string, partBase []int, s geminiSupport) int {
	seg := s.Segment
	bases := []int{0}
	if pi := seg.PartIndex; pi != nil && *pi >= 0 && *pi < len(partBase) && partBase[*pi] > 0 {
		bases = []int{partBase[*pi], 0}
	}
	for _, b := range bases {
		start, end := b+seg.StartIndex, b+seg.EndIndex
		if start < 0 || start > end || end > len(text) {
			continue
		}
		if seg.Text == "" || text[start:end] == seg.Text {
			return end
		}
	}
	want := bases[0] + seg.EndIndex
	for _, t := range []string{seg.Text, strings.TrimSpace(seg.Text)} {
		if t == "" {
			continue
		}
		if end, ok := groundedANearest(text, t, want); ok {
			return end
		}
	}
	return min(max(want, 0), len(text))
}

// groundedANearest finds the occurrence of sub in text whose end is nearest to want,
// and returns that end (a byte offset).
func groundedANearest(text, sub string, want int) (int, bool) {
	best, found := 0, false
	for from := 0; from <= len(text); {
		i := strings.Index(text[from:], sub)
		if i < 0 {
			break
		}
		end := from + i + len(sub)
		if !found || groundedAAbs(end-want) < groundedAAbs(best-want) {
			best, found = end, true
		}
		from += i + 1
	}
	return best, found
}

func groundedAAbs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
