package openaichat

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The OpenAI-Chat providers whose own web search the fleet forwards are variants of
// the Chat model codec: Moonshot Kimi (the builtin function "$web_search",
// WIRE_FORMATS.md §5) and Zhipu GLM (the "web_search" tool, §4a). Their payload
// formats (link citing, GLM's results and ref markers) are pkg/llm/nativechat's.

// usdPerCNY converts Moonshot's and Zhipu's yuan list prices for accounting: the same
// fixed, documented rate as the engines of those providers (engines' glmUSDPerCNY,
// ≈ the 2025–2026 average; see internal/fixtures/SOURCES.md), so costs are
// reproducible. Kimi: ¥0.03 per $web_search call (Moonshot's docs, WIRE_FORMATS.md
// §5). GLM: the search_pro engine the codec asks for, ¥0.03 per call (§4a).
const (
	usdPerCNY     = 0.14
	kimiSearchUSD = 0.03 * usdPerCNY
	glmSearchUSD  = 0.03 * usdPerCNY
)

// SearchRounds is a ModelAPI whose own search runs in rounds the fleet plays (Kimi's
// echo): with the search on, its answer is read whole and each round resumed
// (Continuer).
type SearchRounds interface {
	SearchRounds()
}

// Kimi is Moonshot Kimi's Chat API with its $web_search: the request declares
// the builtin function (on every round); the model answers finish_reason tool_calls
// with a $web_search call whose arguments hold an opaque search_id; the assistant
// message goes back as it came with a tool message carrying those arguments verbatim
// (Continue); Moonshot searches and the model answers, its sources only as markdown
// links in its text, cited here as [n] (nativechat.CiteLinks).
var Kimi kimiModel

type kimiModel struct{ chatModel }

func (kimiModel) NativeSearch(string) (string, float64, bool) {
	return "kimi.chat", kimiSearchUSD, true
}
func (kimiModel) TakesFile(string) bool { return false }
func (kimiModel) SearchRounds()         {}

// kimiWebSearch is the builtin function's name.
const kimiWebSearch = "$web_search"

// kimiThinkingRE matches the models that think by default, which must have thinking
// disabled to use $web_search (WIRE_FORMATS.md §5).
var kimiThinkingRE = regexp.MustCompile(`^kimi-k2\.[5-9]`)

// EncodeRequest is ChatModel's, with the builtin $web_search declared when r asks for
// the provider's search.
func (kimiModel) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	return chatModelRequest(r, Kimi, model, func(out wire.TopLevel) {
		if r.Search == nil {
			return
		}
		out.Set("tools", append(toolList(out), json.RawMessage(`{"type":"builtin_function","function":{"name":"$web_search"}}`)))
		if _, set := r.Params["thinking"]; !set && kimiThinkingRE.MatchString(model) {
			out.Set("thinking", map[string]string{"type": "disabled"})
		}
	})
}

// DecodeResponse reads one round: its $web_search calls are the provider's searches
// (the answer pauses when they are all it called: Continue echoes them), its links
// cited.
func (kimiModel) DecodeResponse(body []byte) (*wire.Response, error) {
	r, err := Model.DecodeResponse(body)
	if err != nil {
		return nil, err
	}
	var content []wire.Part
	others := 0
	for _, p := range r.Content {
		switch {
		case p.Kind == wire.PartToolCall && p.Call.Name == kimiWebSearch:
			content = append(content, wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: p.Call.ID, Name: llm.WebSearchTool}})
			r.Usage.WebSearches++
			continue
		case p.Kind == wire.PartToolCall:
			others++
		case p.Kind == wire.PartText && nativechat.HasLinks(p.Text):
			text, sources := nativechat.CiteLinks(p.Text)
			p = citedPart(text, sources)
		}
		content = append(content, p)
	}
	r.Content = content
	if r.Usage.WebSearches > 0 && others == 0 {
		// Only searches: the round pauses for its echo; a $web_search mixed with
		// other calls is not echoed (the chain answers the others).
		r.Paused, r.Stop = r.Stop == wire.StopToolUse, wire.StopEndTurn
	}
	if r.Paused {
		for i := range r.Content {
			if p := &r.Content[i]; p.Kind == wire.PartText && p.Text != "" {
				p.Text += "\n\n" // the next round's text is a new paragraph
			}
		}
	}
	return r, nil
}

// Continue echoes a round that only searched: the assistant message as it came and
// each $web_search call's arguments verbatim in a tool message (with the documented
// name).
func (kimiModel) Continue(request, answer []byte) ([]byte, bool) {
	c, err := llm.ParseCompletion(answer)
	if err != nil || c.FinishReason != "tool_calls" {
		return nil, false
	}
	var m struct {
		ToolCalls []llm.ToolCall `json:"tool_calls"`
	}
	json.Unmarshal(c.Message, &m)
	if len(m.ToolCalls) == 0 {
		return nil, false
	}
	var top map[string]json.RawMessage
	var msgs []json.RawMessage
	if json.Unmarshal(request, &top) != nil || json.Unmarshal(top["messages"], &msgs) != nil {
		return nil, false
	}
	msgs = append(msgs, c.Message)
	for _, tc := range m.ToolCalls {
		if tc.Function.Name != kimiWebSearch {
			return nil, false
		}
		echo, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": tc.ID, "name": kimiWebSearch, "content": tc.Function.Arguments})
		msgs = append(msgs, echo)
	}
	top["messages"], _ = json.Marshal(msgs)
	next, err := json.Marshal(top)
	return next, err == nil
}

// GLM is Zhipu GLM's Chat API with its web_search tool: the model searches and
// answers in one call, the results in a top-level "web_search" array next to
// "choices" (on one chunk when streamed), its text citing them with free-text markers
// that name a refer ("[ref_1]", "[来源：ref_1]"), cited here as [n].
var GLM glmModel

type glmModel struct{ chatModel }

func (glmModel) NativeSearch(string) (string, float64, bool) { return "glm.chat", glmSearchUSD, true }
func (glmModel) TakesFile(string) bool                       { return false }

// glmTool declares GLM's search for a main model: search_pro, what Zhipu's own
// examples use.
var glmTool = nativechat.GLMTool(nativechat.GLMSearch{Engine: "search_pro"})

// EncodeRequest is ChatModel's, with the web_search tool declared when r asks for the
// provider's search.
func (glmModel) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	return chatModelRequest(r, GLM, model, func(out wire.TopLevel) {
		if r.Search != nil {
			out.Set("tools", append(toolList(out), glmTool))
		}
	})
}

// DecodeResponse reads an answer with its web_search array: one search, its results,
// the text's ref markers as citations.
func (glmModel) DecodeResponse(body []byte) (*wire.Response, error) {
	r, err := Model.DecodeResponse(body)
	if err != nil {
		return nil, err
	}
	return glmAnswer(r, nativechat.GLMResults(body)), nil
}

func (glmModel) NewStreamDecoder() wire.StreamDecoder {
	return &glmDecoder{chatDecoder: chatDecoder{s: llm.NewChatStream()}}
}

// glmDecoder keeps the web_search array of the chunk that carries it.
type glmDecoder struct {
	chatDecoder
	items []nativechat.GLMItem
}

func (d *glmDecoder) Event(name string, data []byte) (string, error) {
	if d.items == nil && bytes.Contains(data, []byte(`"web_search"`)) {
		d.items = nativechat.GLMResults(data)
	}
	return d.chatDecoder.Event(name, data)
}

func (d *glmDecoder) Response() (*wire.Response, error) {
	r, err := d.chatDecoder.Response()
	if err != nil {
		return nil, err
	}
	return glmAnswer(r, d.items), nil
}

// glmAnswer adds a GLM answer's search (items nil: the model did not search).
func glmAnswer(r *wire.Response, items []nativechat.GLMItem) *wire.Response {
	if items == nil {
		return r
	}
	res := &wire.SearchResult{CallID: r.ID}
	for _, it := range items {
		if it.Link != "" {
			res.Sources = append(res.Sources, wire.Source{URL: it.Link, Title: it.Title})
		}
	}
	content := []wire.Part{{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: r.ID, Name: llm.WebSearchTool}}, {Kind: wire.PartServerResult, Search: res}}
	for _, p := range r.Content {
		if p.Kind == wire.PartText {
			text, sources := nativechat.GLMCite(p.Text, items)
			p = citedPart(text, sources)
		}
		content = append(content, p)
	}
	r.Content = content
	r.Usage.WebSearches = 1
	return r
}

// markerRE is an [n] marker the citing wrote.
var markerRE = regexp.MustCompile(`\[([0-9]{1,4})\]`)

// citedPart turns a text the payload citing marked (each [n] naming sources[n-1]) into
// a text part without the markers, a citation at each marker's place: the answer
// renders them back as [n] (ChatAnswer), numbered over all its parts.
func citedPart(text string, sources []llm.NativeSource) wire.Part {
	p := wire.Part{Kind: wire.PartText}
	var b strings.Builder
	prev, runes := 0, 0
	for _, m := range markerRE.FindAllStringSubmatchIndex(text, -1) {
		n, _ := strconv.Atoi(text[m[2]:m[3]])
		if n < 1 || n > len(sources) {
			continue
		}
		b.WriteString(text[prev:m[0]])
		runes += utf8.RuneCountInString(text[prev:m[0]])
		prev = m[1]
		s := sources[n-1]
		p.Citations = append(p.Citations, wire.Citation{URL: s.URL, Title: s.Title, Start: runes, End: runes})
	}
	b.WriteString(text[prev:])
	p.Text = b.String()
	return p
}

// toolList returns the tools of a request being built.
func toolList(out wire.TopLevel) []any {
	tools, _ := out["tools"].([]any)
	return tools
}
