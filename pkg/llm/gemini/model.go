// Package gemini is the Gemini generateContent protocol as the fleet speaks it to a
// main model (Model); no client speaks it to the ingress.
package gemini

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/provider"
)

// Model is the Gemini Developer API as the fleet speaks it to a main model:
// POST {base}/v1beta/models/{model}:generateContent (:streamGenerateContent?alt=sse
// when streaming), the key in x-goog-api-key (never in the URL).
var Model geminiModel

type geminiModel struct{}

// geminiCallPrefix marks the ids the fleet gives function calls that came without
// one (Gemini ids are optional): they are not sent back to the model.
const geminiCallPrefix = "gcall_"

// geminiSkipSignature is the thoughtSignature Google documents for function calls
// replayed without the signature the model gave them.
const geminiSkipSignature = "skip_thought_signature_validator"

// gemini3 reports whether model is Gemini 3 or later: it validates the thought
// signatures of replayed function calls, bills grounding per search query rather than
// per grounded prompt, and takes a thinkingLevel rather than a thinkingBudget.
func gemini3(model string) bool { return wire.GeminiVersion(model) >= 3 }

func (geminiModel) Protocol() wire.Protocol { return wire.Gemini }

// NativeSearch: Gemini grounding with Google Search is $35 per 1,000 grounded prompts
// (ai.google.dev/gemini-api/docs/pricing, 2.x Flash and Pro paid tier; one request per
// answer that searched); Gemini 3 bills $14 per 1,000 search queries it ran instead
// (empty queries are not billed; WIRE_FORMATS.md, "Pricing").
func (geminiModel) NativeSearch(model string) (string, float64, bool) {
	if gemini3(model) {
		return string(wire.Gemini), 0.014, true
	}
	return string(wire.Gemini), 0.035, true
}

// TakesFile: inlineData carries PDFs, images, audio and video, by their bytes only.
func (geminiModel) TakesFile(media string) bool {
	kind, _, _ := strings.Cut(media, "/")
	return media == wire.MediaPDF || kind == "image" || kind == "audio" || kind == "video"
}

func (geminiModel) TakesFileURL(string) bool { return false }

func (geminiModel) Path(model string, stream bool) string {
	if stream {
		return "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
	}
	return "/v1beta/models/" + model + ":generateContent"
}

func (geminiModel) Authorize(h http.Header, key string) {
	if key != "" {
		h.Set("x-goog-api-key", key)
	}
}

// EncodeRequest renders r as a generateContent request: contents of user and model
// turns (functionCall parts in model turns, functionResponse parts in user turns,
// named after the call they answer), systemInstruction, the client tools as
// functionDeclarations, toolConfig and generationConfig. The model is in the URL.
func (geminiModel) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	r, err := wire.ModelFiles(r, Model, model)
	if err != nil {
		return nil, err
	}
	names := map[string]string{} // call id → function name, for functionResponse
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Kind == wire.PartToolCall {
				names[p.Call.ID] = p.Call.Name
			}
		}
	}
	type content struct {
		Role  string `json:"role"`
		Parts []any  `json:"parts"`
	}
	var contents []content
	for _, m := range r.Messages {
		role := "user"
		if m.Role == wire.RoleAssistant {
			role = "model"
		}
		var parts []any
		signed := false
		signature := "" // the thoughtSignature of the part that follows
		for _, p := range m.Parts {
			switch p.Kind {
			case wire.PartReasoning:
				if rs, ok := wire.ReasoningFor(p, wire.Gemini); ok && rs.Signature != "" {
					signature = rs.Signature
				}
				continue
			case wire.PartText:
				if p.Text == "" {
					continue // no part, so the signature stays for the part that follows
				}
				parts = append(parts, map[string]string{"text": p.Text})
			case wire.PartImage: // inlineData for base64 and data: URLs, fileData for other URLs
				part := map[string]any{"fileData": map[string]string{"fileUri": p.Image.URL}}
				if media, data, ok := p.Image.Inline(); ok {
					part = map[string]any{"inlineData": map[string]string{"mimeType": media, "data": data}}
				}
				parts = append(parts, part)
			case wire.PartFile:
				parts = append(parts, map[string]any{"inlineData": map[string]string{"mimeType": p.File.MediaType, "data": p.File.Data}})
			case wire.PartServerCall, wire.PartServerResult:
				parts = append(parts, map[string]string{"text": wire.RenderServerPart(p)})
			case wire.PartToolCall:
				// The fleet's call id goes back only when it is not one made up for
				// Gemini's id-less calls.
				call := map[string]any{"name": p.Call.Name, "args": wire.ToolArgs(p.Call.Arguments)}
				if !strings.HasPrefix(p.Call.ID, geminiCallPrefix) {
					call["id"] = p.Call.ID
				}
				part := map[string]any{"functionCall": call}
				switch {
				case signature != "":
					// The signature the model gave this call, back on it unchanged.
					part["thoughtSignature"] = signature
					signed = true
				case !signed && gemini3(model) && !partsSigned(m.Parts):
					// Gemini 3 refuses a replayed turn whose first call has no thought
					// signature: a call the model never made (another protocol's
					// history) gets Google's documented sentinel.
					part["thoughtSignature"] = geminiSkipSignature
					signed = true
				}
				parts = append(parts, part)
			case wire.PartToolResult:
				name := cmp.Or(names[p.Result.CallID], "tool")
				text := wire.ResultText(p.Result)
				fr := map[string]any{"name": name, "response": map[string]string{"result": text}}
				if p.Result.IsError {
					fr["response"] = map[string]string{"error": text}
				}
				if !strings.HasPrefix(p.Result.CallID, geminiCallPrefix) {
					fr["id"] = p.Result.CallID
				}
				parts = append(parts, map[string]any{"functionResponse": fr})
			}
			signature = ""
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			continue
		}
		contents = append(contents, content{Role: role, Parts: parts})
	}
	if len(contents) == 0 {
		return nil, wire.Invalid("contents", "the conversation has no content for the model")
	}
	out := wire.TopLevel{}
	out.Set("contents", contents)
	if r.System != "" {
		out.Set("systemInstruction", map[string]any{"parts": []any{map[string]string{"text": r.System}}})
	}
	var tools []any
	if r.Search != nil {
		// The provider's own search: grounding with Google Search (its settings have no
		// counterpart in the tool).
		tools = append(tools, map[string]any{"googleSearch": map[string]any{}})
		out.Set("tools", tools)
	}
	if len(r.Tools) > 0 {
		decls := make([]any, 0, len(r.Tools))
		for _, t := range r.Tools {
			decls = append(decls, t.Decl("parameters"))
		}
		out.Set("tools", append(tools, map[string]any{"functionDeclarations": decls}))
		if tc := r.ToolChoice; tc != nil {
			cfg := map[string]any{"mode": cmp.Or(geminiModes[tc.Mode], "AUTO")}
			if tc.Mode == "tool" {
				cfg["allowedFunctionNames"] = []string{tc.Name}
			}
			out.Set("toolConfig", map[string]any{"functionCallingConfig": cfg})
		}
	}
	gen := map[string]any{}
	if r.MaxTokens > 0 {
		gen["maxOutputTokens"] = r.MaxTokens
	}
	if r.Temperature != nil {
		gen["temperature"] = *r.Temperature
	}
	if r.TopP != nil {
		gen["topP"] = *r.TopP
	}
	if len(r.Stop) > 0 {
		gen["stopSequences"] = r.Stop
	}
	if tc := thinkingConfig(r.Reasoning, model); tc != nil {
		gen["thinkingConfig"] = tc
	}
	if f := wire.ResponsesFormat(r.ResponseFormat); f != nil {
		gen["responseMimeType"] = "application/json"
		if s, ok := f["schema"]; ok {
			gen["responseJsonSchema"] = s
		}
	}
	out.Set("generationConfig", gen)
	return json.Marshal(out)
}

// geminiModes are the functionCallingConfig modes of the canonical tool choices
// (AUTO for any other).
var geminiModes = map[string]string{"none": "NONE", "required": "ANY", "tool": "ANY"}

// NativeSearchFits reports whether grounding with Google Search can go with r: only
// without function tools (Gemini 2.x refuses the two together — "Multiple tools are
// supported only when they are all search tools" — and Gemini 3 takes them only with
// server-side tool invocations, which the fleet does not replay), so a request with
// the client's tools keeps the fleet's web_search instead.
func (geminiModel) NativeSearchFits(r *wire.Request, _ string) bool { return len(r.Tools) == 0 }

// geminiAnswer is a GenerateContentResponse (or one chunk of a stream).
type geminiAnswer struct {
	Candidates []struct {
		Content struct {
			Parts []geminiPart `json:"parts"`
		} `json:"content"`
		FinishReason      string           `json:"finishReason"`
		GroundingMetadata *geminiGrounding `json:"groundingMetadata"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int `json:"promptTokenCount"`
		CandidatesTokenCount    int `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string           `json:"modelVersion"`
	ResponseID   string           `json:"responseId"`
	Error        *geminiErrorBody `json:"error"`
}

type geminiPart struct {
	Text    string `json:"text"`
	Thought bool   `json:"thought"`
	// ThoughtSignature is the signature the model put on the part (on a
	// functionCall part: required back with it by Gemini 3).
	ThoughtSignature string `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

// geminiGrounding is a candidate's groundingMetadata: the queries Google Search ran,
// the pages the answer was grounded on, and which segment of the text each supports.
type geminiGrounding struct {
	WebSearchQueries []string `json:"webSearchQueries"`
	GroundingChunks  []struct {
		Web *struct {
			URI   string `json:"uri"`
			Title string `json:"title"`
		} `json:"web"`
	} `json:"groundingChunks"`
	GroundingSupports []struct {
		Segment struct {
			// PartIndex names the part the offsets may count in; StartIndex and
			// EndIndex are byte offsets of the segment (UTF-8); Text is the segment's
			// text, which says where it is when the offsets do not (segmentEnd).
			PartIndex  *int   `json:"partIndex"`
			StartIndex int    `json:"startIndex"` // omitted when 0 (proto3)
			EndIndex   int    `json:"endIndex"`
			Text       string `json:"text"`
		} `json:"segment"`
		GroundingChunkIndices []int `json:"groundingChunkIndices"`
	} `json:"groundingSupports"`
}

// merge folds a later chunk's grounding metadata into g: each field it carries
// replaces the earlier one (a stream sends the metadata whole, on its last chunks).
func (g *geminiGrounding) merge(o *geminiGrounding) {
	if len(o.WebSearchQueries) > 0 {
		g.WebSearchQueries = o.WebSearchQueries
	}
	if len(o.GroundingChunks) > 0 {
		g.GroundingChunks = o.GroundingChunks
	}
	if len(o.GroundingSupports) > 0 {
		g.GroundingSupports = o.GroundingSupports
	}
}

type geminiErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
}

var geminiStops = map[string]wire.StopReason{"STOP": wire.StopEndTurn, "MAX_TOKENS": wire.StopMaxTokens, "SAFETY": wire.StopRefusal, "RECITATION": wire.StopRefusal,
	"BLOCKLIST": wire.StopRefusal, "PROHIBITED_CONTENT": wire.StopRefusal, "SPII": wire.StopRefusal, "IMAGE_SAFETY": wire.StopRefusal}

// DecodeResponse reads a generateContent answer: the first candidate's text parts
// (thought summaries as reasoning parts) and functionCall parts (each given an id when it has none,
// after its thoughtSignature as a reasoning part),
// usage (thinking tokens count as output) and the finish reason; a prompt blocked
// before any candidate is a refusal.
func (geminiModel) DecodeResponse(body []byte) (*wire.Response, error) {
	var a geminiAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("not a generateContent response: %s", wire.Clip(err.Error(), 200))
	}
	if a.Error != nil {
		return nil, geminiError(a.Error.Code, a.Error, body)
	}
	if len(a.Candidates) == 0 && (a.PromptFeedback == nil || a.PromptFeedback.BlockReason == "") {
		return nil, fmt.Errorf("not a generateContent response: the response has no candidates")
	}
	acc := geminiAccumulator{}
	acc.add(&a)
	return acc.response(), nil
}

// geminiAccumulator merges a stream's chunks (or holds one whole answer).
type geminiAccumulator struct {
	id, model, finish string
	blockReason       string // a prompt blocked before any candidate
	parts             []geminiPart
	input, output     int
	chunks            int
	grounding         geminiGrounding
	// partBase is the byte offset at which each part of the first chunk starts in
	// the answer's text: where a grounding segment's partIndex points.
	partBase []int
}

// add merges a chunk and returns the text it adds.
func (acc *geminiAccumulator) add(a *geminiAnswer) string {
	acc.chunks++
	acc.id = cmp.Or(a.ResponseID, acc.id)
	acc.model = cmp.Or(a.ModelVersion, acc.model)
	if u := a.UsageMetadata; u != nil {
		// Every chunk carries the usage so far.
		acc.input = u.PromptTokenCount + u.ToolUsePromptTokenCount
		acc.output = u.CandidatesTokenCount + u.ThoughtsTokenCount
	}
	if a.PromptFeedback != nil && a.PromptFeedback.BlockReason != "" {
		acc.blockReason = a.PromptFeedback.BlockReason
	}
	var text strings.Builder
	if len(a.Candidates) > 0 {
		c := a.Candidates[0]
		acc.finish = cmp.Or(c.FinishReason, acc.finish)
		if c.GroundingMetadata != nil {
			acc.grounding.merge(c.GroundingMetadata)
		}
		base := acc.textLen()
		for _, p := range c.Content.Parts {
			if acc.chunks == 1 {
				acc.partBase = append(acc.partBase, base+text.Len())
			}
			if p.FunctionCall != nil {
				acc.parts = append(acc.parts, p)
				continue
			}
			if p.Text == "" {
				continue
			}
			if !p.Thought {
				text.WriteString(p.Text) // a thought summary is not the answer's text
			}
			if n := len(acc.parts); n > 0 && acc.parts[n-1].FunctionCall == nil && acc.parts[n-1].Thought == p.Thought {
				acc.parts[n-1].Text += p.Text
			} else {
				acc.parts = append(acc.parts, geminiPart{Text: p.Text, Thought: p.Thought})
			}
		}
	}
	return text.String()
}

// textLen is the byte length of the answer's text so far.
func (acc *geminiAccumulator) textLen() int {
	n := 0
	for _, p := range acc.parts {
		if !p.Thought {
			n += len(p.Text)
		}
	}
	return n
}

func (acc *geminiAccumulator) response() *wire.Response {
	r := &wire.Response{ID: acc.id, Model: acc.model, Status: wire.StatusCompleted, Stop: cmp.Or(geminiStops[acc.finish], wire.StopEndTurn),
		Usage: wire.Usage{InputTokens: acc.input, OutputTokens: acc.output}}
	r.StopDetail = acc.finish
	if acc.blockReason != "" {
		r.Stop, r.StopDetail = wire.StopRefusal, "blocked: "+acc.blockReason
	}
	for i, p := range acc.parts {
		if fc := p.FunctionCall; fc != nil {
			id := cmp.Or(fc.ID, geminiCallID(acc.id, i, fc.Name, fc.Args))
			if p.ThoughtSignature != "" {
				r.Content = append(r.Content, wire.Part{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.Gemini, Signature: p.ThoughtSignature}})
			}
			r.Content = append(r.Content, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: id, Name: fc.Name, Arguments: wire.CompactArgs(fc.Args)}})
			r.Stop = wire.StopToolUse
			continue
		}
		if p.Thought {
			// A thought summary (thinkingConfig.includeThoughts): the model's
			// reasoning in words, never sent back to it.
			r.Content = append(r.Content, wire.Part{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.Gemini, Text: p.Text}})
			continue
		}
		r.Content = append(r.Content, wire.Part{Kind: wire.PartText, Text: p.Text})
	}
	acc.ground(r)
	return r
}

// ground adds an answer's Google Search grounding: a server call per query the search
// ran (each listing the pages the answer was grounded on: Gemini does not say which
// query found which page), before the text; a citation of each page a segment cites,
// at the segment's end; the billed requests: one for the answer (Gemini 2.x bills the
// grounded prompt), or one per query it ran (Gemini 3 bills queries).
func (acc *geminiAccumulator) ground(r *wire.Response) {
	g := &acc.grounding
	var pages []wire.Source
	for _, c := range g.GroundingChunks {
		if c.Web != nil && c.Web.URI != "" {
			pages = append(pages, wire.Source{URL: c.Web.URI, Title: c.Web.Title})
		}
	}
	var searches []wire.Part
	for i, q := range g.WebSearchQueries {
		if q == "" {
			continue
		}
		id := fmt.Sprintf("gsearch_%s_%d", acc.id, i)
		searches = append(searches, wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: id, Name: "web_search", Query: q}},
			wire.Part{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: id, Sources: pages}})
	}
	if len(searches) > 0 {
		r.Usage.WebSearches = 1
		if gemini3(acc.model) {
			r.Usage.WebSearches = len(searches) / 2 // a call and its result a query
		}
		r.Content = append(searches, r.Content...)
	}
	text := r.Text()
	for _, s := range g.GroundingSupports {
		p, at := textAt(r.Content, acc.segmentEnd(text, s.Segment.PartIndex, s.Segment.StartIndex, s.Segment.EndIndex, s.Segment.Text))
		if p == nil {
			continue
		}
		for _, k := range s.GroundingChunkIndices {
			if k < 0 || k >= len(g.GroundingChunks) || g.GroundingChunks[k].Web == nil {
				continue
			}
			w := g.GroundingChunks[k].Web
			p.Citations = append(p.Citations, wire.Citation{URL: w.URI, Title: w.Title, Start: at, End: at})
		}
	}
}

// segmentEnd returns the byte offset in text (the answer's text) where a grounding
// segment ends: its endIndex when text[startIndex:endIndex] is the segment's text
// (offsets count in the whole answer or, with partIndex, possibly in that part),
// else the end of the occurrence of the segment's text nearest to endIndex, else
// endIndex as given (clamped to the text).
func (acc *geminiAccumulator) segmentEnd(text string, partIndex *int, start, end int, seg string) int {
	bases := []int{0}
	if pi := partIndex; pi != nil && *pi >= 0 && *pi < len(acc.partBase) && acc.partBase[*pi] > 0 {
		bases = []int{acc.partBase[*pi], 0}
	}
	for _, b := range bases {
		s, e := b+start, b+end
		if s < 0 || s > e || e > len(text) {
			continue
		}
		if seg == "" || text[s:e] == seg {
			return e
		}
	}
	want := bases[0] + end
	for _, t := range []string{seg, strings.TrimSpace(seg)} {
		if e, ok := wire.NearestEnd(text, t, want); ok {
			return e
		}
	}
	return min(max(want, 0), len(text))
}

// textAt finds byte offset off of the text of parts (their text parts in order): the
// part it falls in and its code point offset there (a byte inside a character counts
// as the character's end). nil when off is past the text.
func textAt(parts []wire.Part, off int) (*wire.Part, int) {
	if off < 0 {
		return nil, 0
	}
	for i := range parts {
		p := &parts[i]
		if p.Kind != wire.PartText {
			continue
		}
		if off > len(p.Text) {
			off -= len(p.Text)
			continue
		}
		for off < len(p.Text) && !utf8.RuneStart(p.Text[off]) {
			off++
		}
		return p, utf8.RuneCountInString(p.Text[:off])
	}
	return nil, 0
}

// geminiCallID names a function call that came without an id: unique within the
// answer, the same each time the same answer is decoded.
func geminiCallID(responseID string, i int, name string, args json.RawMessage) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", responseID, i, name)
	h.Write(args)
	return fmt.Sprintf("%s%s_%d", geminiCallPrefix, hex.EncodeToString(h.Sum(nil)[:8]), i)
}

// geminiError turns a google.rpc error body into an *llm.Error; body is the error's
// whole JSON, whose RetryInfo (provider.RetryAfter reads it) is the retry-after of an
// error that arrived inside an answer or a stream, without headers.
func geminiError(status int, e *geminiErrorBody, body []byte) *llm.Error {
	le := wire.StatusError(cmp.Or(status, e.Code, http.StatusBadGateway), e.Status, e.Message)
	le.RetryAfter = provider.RetryAfter(nil, body, time.Now())
	return le
}

// DecodeError reads {"error":{"code","message","status","details"}}.
func (geminiModel) DecodeError(status int, body []byte) *llm.Error {
	var e struct {
		Error *geminiErrorBody `json:"error"`
	}
	trimmed := strings.TrimSpace(string(body))
	// Errors of a streamed call may come as a one-element array.
	if strings.HasPrefix(trimmed, "[") {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil && len(arr) > 0 {
			body = arr[0]
		}
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Message != "" {
		return geminiError(status, e.Error, body)
	}
	return wire.StatusError(status, "", trimmed)
}

func (geminiModel) NewStreamDecoder() wire.StreamDecoder { return &geminiDecoder{} }

// geminiDecoder reads a streamGenerateContent?alt=sse stream: each event is a
// GenerateContentResponse chunk whose text parts continue the answer; the last
// carries the finish reason (and, with search, the grounding metadata). The text is
// passed on as it comes, nothing held back: the grounding that places the [n] markers
// arrives only with the last chunk, so the markers are in the finished answer
// (Response), not in the streamed text.
type geminiDecoder struct {
	acc geminiAccumulator
}

func (d *geminiDecoder) Event(_ string, data []byte) (string, error) {
	var a geminiAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return "", fmt.Errorf("unreadable generateContent stream chunk: %s", wire.Clip(err.Error(), 200))
	}
	if a.Error != nil {
		return "", geminiError(a.Error.Code, a.Error, data)
	}
	return d.acc.add(&a), nil
}

func (d *geminiDecoder) Response() (*wire.Response, error) {
	if d.acc.chunks == 0 || d.acc.finish == "" && d.acc.blockReason == "" {
		return nil, wire.StatusError(http.StatusBadGateway, "", "the model's stream ended before its finishReason")
	}
	return d.acc.response(), nil
}
