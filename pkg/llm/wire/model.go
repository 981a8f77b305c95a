package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// ModelAPI is a main-model protocol as the fleet speaks it over HTTP: its codec, where
// a call goes and how it authenticates, how its stream and its error bodies read.
type ModelAPI interface {
	ModelCodec
	// Path returns the path of a call to model, appended to the provider's base URL.
	Path(model string, stream bool) string
	// Authorize sets the headers that carry key (and the protocol's version headers).
	Authorize(h http.Header, key string)
	// NewStreamDecoder returns a decoder of one streamed answer: the answer to a
	// request encoded with Stream set.
	NewStreamDecoder() StreamDecoder
	// DecodeError reads a failed call's body (status is the HTTP status) as an
	// *llm.Error; its Provider is left for the caller to set.
	DecodeError(status int, body []byte) *llm.Error
	// TakesFile reports whether the protocol carries a file of the media type as it
	// is (else the file reaches the model as text); TakesFileURL whether it carries
	// it by its URL, unread.
	TakesFile(media string) bool
	TakesFileURL(media string) bool
	// NativeSearch names the provider's own search, as its answers' reports and the
	// trace name it ("native:<name>"), and prices one search by model (the answer's
	// model version); false when the fleet cannot forward it.
	NativeSearch(model string) (name string, priceUSD float64, ok bool)
}

// Continuer is a ModelAPI whose answers may pause before they are done (Anthropic's
// pause_turn after a long run of its own searches).
type Continuer interface {
	// Continue returns the request that resumes a paused answer: request (a body
	// EncodeRequest made, or an earlier Continue) with the paused content sent back
	// exactly as answer (the paused answer's body) had it. paused is false when the
	// answer did not pause.
	Continue(request, answer []byte) (next []byte, paused bool)
}

// SearchFitter is a ModelAPI whose own search cannot go with every request.
type SearchFitter interface {
	// NativeSearchFits reports whether r (its Search set, the fleet's web_search tool
	// taken out) may go to model with the provider's own search.
	NativeSearchFits(r *Request, model string) bool
}

// Join returns the answer r continued by more (a resumed paused answer): the content
// of both in order, the usage of both, more's stop reason.
func (r *Response) Join(more *Response) *Response {
	out := *more
	out.Content = append(append([]Part(nil), r.Content...), more.Content...)
	out.Usage = Usage{InputTokens: r.Usage.InputTokens + more.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens + more.Usage.OutputTokens,
		WebSearches: r.Usage.WebSearches + more.Usage.WebSearches, SearchesReported: r.Usage.SearchesReported + more.Usage.SearchesReported}
	return &out
}

// StreamDecoder assembles one streamed answer from its server-sent events.
type StreamDecoder interface {
	// Event reads one event; text is the answer text it adds ("" when none). An error
	// reported in the stream comes back as an *llm.Error.
	Event(name string, data []byte) (text string, err error)
	// Response returns the answer the events made, or an error when the stream ended
	// before the answer did.
	Response() (*Response, error)
}

// ChatFinish is the Chat finish_reason of a stop reason.
var ChatFinish = map[StopReason]string{StopEndTurn: "stop", StopToolUse: "tool_calls", StopMaxTokens: "length", StopRefusal: "content_filter"}

// native is the provider's own search of an answer, while its text is rendered.
type native struct {
	llm.NativeSearch
	number  map[string]int // cited URL → its [n]
	results bool           // the answer says what its searches found
}

// MarkedText renders an answer's text with an [n] marker for each of its citations
// (URLs numbered in the order first cited) and returns it with the cited pages: the
// form a grounded engine reads an answer in.
func (r *Response) MarkedText() (string, []llm.NativeSource) {
	n := &native{number: map[string]int{}}
	n.Sources = []llm.NativeSource{}
	var text string
	for _, p := range r.Content {
		if p.Kind == PartText {
			text += n.mark(p)
		}
	}
	return text, n.Sources
}

// attribute gives the cited pages to the last search when the answer does not say
// which search found what (Kimi's).
func (n *native) attribute() {
	if k := len(n.Searches); k > 0 && !n.results {
		for _, s := range n.Sources {
			n.Searches[k-1].URLs = append(n.Searches[k-1].URLs, s.URL)
		}
	}
}

// nativeSearch collects an answer's provider-run searches (nil: none ran).
func nativeSearch(r *Response) *native {
	n := &native{number: map[string]int{}}
	for _, p := range r.Content {
		switch p.Kind {
		case PartServerCall:
			n.Searches = append(n.Searches, llm.NativeQuery{ID: p.Server.ID, Query: p.Server.Query, URLs: []string{}})
		case PartServerResult:
			n.results = true
			for i := range n.Searches {
				q := &n.Searches[i]
				if q.ID != p.Search.CallID {
					continue
				}
				for _, s := range p.Search.Sources {
					q.URLs = append(q.URLs, s.URL)
				}
				if p.Search.Error != nil {
					q.Error = p.Search.Error.Code
				}
			}
		}
	}
	if len(n.Searches) == 0 && r.Usage.WebSearches == 0 {
		return nil
	}
	n.Requests = r.Usage.WebSearches
	if n.Requests == 0 {
		for _, q := range n.Searches {
			if q.Error == "" {
				n.Requests++
			}
		}
	}
	n.Sources = []llm.NativeSource{}
	return n
}

// mark returns a text part with an [n] marker for each of its citations: after the
// cited span (offsets) or after the part (a block-level citation), each URL numbered
// once, in the order first cited.
func (n *native) mark(p Part) string {
	if len(p.Citations) == 0 {
		return p.Text
	}
	runes := []rune(p.Text)
	at := map[int][]int{} // rune offset → markers
	for _, c := range p.Citations {
		k, ok := n.number[c.URL]
		if !ok {
			n.Sources = append(n.Sources, llm.NativeSource{URL: c.URL, Title: c.Title})
			k = len(n.Sources)
			n.number[c.URL] = k
		}
		end := c.End
		if c.Start < 0 || end > len(runes) || end < 0 {
			end = len(runes)
		}
		if !slices.Contains(at[end], k) {
			at[end] = append(at[end], k)
		}
	}
	var b strings.Builder
	for i := 0; i <= len(runes); i++ {
		if ks := at[i]; len(ks) > 0 {
			for _, k := range ks {
				fmt.Fprintf(&b, "[%d]", k)
			}
		}
		if i < len(runes) {
			b.WriteRune(runes[i])
		}
	}
	return b.String()
}

// ToolArgs returns a tool call's arguments as a JSON object for protocols that carry
// them as one (Anthropic input, Gemini args); arguments that are not an object are
// wrapped as {"arguments": "…"} so the model still sees what it wrote (an object is
// valid JSON whose first byte is "{").
func ToolArgs(args string) json.RawMessage {
	raw := json.RawMessage(args)
	if first := strings.TrimLeft(args, " \t\r\n"); first != "" && first[0] == '{' && json.Valid(raw) {
		return raw
	}
	if args == "" {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(map[string]string{"arguments": args})
	return b
}

// CompactArgs renders a protocol's argument object as Chat's arguments string.
func CompactArgs(raw json.RawMessage) string {
	if IsNull(raw) {
		return "{}"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ResultText is a tool result's text (images are not forwarded to a tool result).
func ResultText(res *ToolResult) string { return TextLines(res.Parts) }

// TextLines is the text of the text parts of parts, one part a line.
func TextLines(parts []Part) string {
	var s string
	for _, p := range parts {
		if p.Kind == PartText {
			if s != "" {
				s += "\n"
			}
			s += p.Text
		}
	}
	return s
}

// StatusError is an *llm.Error for an error a provider reported inside a 200 answer
// or a stream.
func StatusError(status int, typ, msg string) *llm.Error {
	return &llm.Error{Status: status, Type: typ, Message: Clip(msg, 500)}
}

// NearestEnd returns the end (a byte offset) of the occurrence of sub in text whose end
// is nearest to want: where a provider's offsets into an answer's text are off, the
// cited words or link are found by their text (Gemini's grounding segments, OpenAI's
// url_citation links).
func NearestEnd(text, sub string, want int) (int, bool) {
	best, found := 0, false
	for from := 0; sub != "" && from <= len(text); {
		i := strings.Index(text[from:], sub)
		if i < 0 {
			break
		}
		end := from + i + len(sub)
		if !found || max(end-want, want-end) < max(best-want, want-best) {
			best, found = end, true
		}
		from += i + 1
	}
	return best, found
}
