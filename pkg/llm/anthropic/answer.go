package anthropic

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"maps"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

var anthropicStops = map[wire.StopReason]string{wire.StopEndTurn: "end_turn", wire.StopToolUse: "tool_use", wire.StopMaxTokens: "max_tokens", wire.StopRefusal: "refusal"}

// serverToolID is the srvtoolu_ id of a fleet search.
func serverToolID(id string) string { return "srvtoolu_" + wire.IDToken(id) }

// opaque stands in for Anthropic's encrypted fields: the fleet needs nothing back, but
// the field is required and clients send it back unchanged.
func opaque(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// anthropicBlocks renders a response's content: server_tool_use and
// web_search_tool_result per search, text blocks cut at each cited span with
// web_search_result_location citations, tool_use blocks.
func anthropicBlocks(r *wire.Response) []map[string]any {
	var out []map[string]any
	for _, p := range r.Content {
		switch p.Kind {
		case wire.PartServerCall:
			if p.Server.IsFetch() {
				out = append(out, map[string]any{"type": "server_tool_use", "id": serverToolID(p.Server.ID), "name": wire.FetchName, "input": map[string]string{"url": p.Server.URL}})
				break
			}
			out = append(out, map[string]any{"type": "server_tool_use", "id": serverToolID(p.Server.ID), "name": "web_search", "input": map[string]string{"query": p.Server.Query}})
		case wire.PartServerResult:
			if b := anthropicFetchResult(p.Search); b != nil {
				out = append(out, b)
				break
			}
			var content any
			if e := p.Search.Error; e != nil {
				content = map[string]string{"type": "web_search_tool_result_error", "error_code": e.Code}
			} else {
				hits := []any{}
				for _, s := range p.Search.Sources {
					var age any
					if s.PageAge != "" {
						age = s.PageAge
					}
					hits = append(hits, map[string]any{"type": "web_search_result", "url": s.URL, "title": s.Title, "encrypted_content": opaque(s.URL), "page_age": age})
				}
				content = hits
			}
			out = append(out, map[string]any{"type": "web_search_tool_result", "tool_use_id": serverToolID(p.Search.CallID), "content": content})
		case wire.PartText:
			out = append(out, textBlocks(p)...)
		case wire.PartReasoning:
			if b := clientThinkingBlock(p); b != nil {
				out = append(out, b)
			}
		case wire.PartToolCall:
			var input any = json.RawMessage(p.Call.Arguments)
			var obj map[string]json.RawMessage
			if json.Unmarshal([]byte(p.Call.Arguments), &obj) != nil || obj == nil {
				input = map[string]string{"arguments": p.Call.Arguments}
			}
			out = append(out, map[string]any{"type": "tool_use", "id": p.Call.ID, "name": p.Call.Name, "input": input})
		}
	}
	if out == nil {
		out = []map[string]any{}
	}
	return out
}

// textBlocks cuts a text part into blocks: each run of text ending with cited spans
// (adjacent spans together) carries their citations; the rest carries none. The
// blocks' texts concatenate to the part's text.
func textBlocks(p wire.Part) []map[string]any {
	runes := []rune(p.Text)
	cits := append([]wire.Citation(nil), p.Citations...)
	sort.SliceStable(cits, func(i, j int) bool { return cits[i].Start < cits[j].Start })
	var out []map[string]any
	from := 0
	for i := 0; i < len(cits); {
		c := cits[i]
		if c.Start < 0 || c.End > len(runes) || c.Start < from {
			i++
			continue
		}
		end, group := c.End, []wire.Citation{c}
		for i++; i < len(cits) && cits[i].Start == end && cits[i].End <= len(runes); i++ {
			end = cits[i].End
			group = append(group, cits[i])
		}
		cited := strings.TrimSpace(string(runes[from:c.Start]))
		if k := strings.LastIndexAny(cited, ".!?\n"); k >= 0 && k < len(cited)-1 {
			cited = strings.TrimSpace(cited[k+1:])
		}
		cited = tail(cited, 150)
		var cs []any
		for _, g := range group {
			cs = append(cs, map[string]any{"type": "web_search_result_location", "url": g.URL, "title": g.Title, "cited_text": cited, "encrypted_index": opaque(g.URL)})
		}
		out = append(out, map[string]any{"type": "text", "text": string(runes[from:end]), "citations": cs})
		from = end
	}
	if from < len(runes) || len(out) == 0 {
		// A text block without citations has no citations field (the API sends none,
		// and schema-validating clients refuse a null).
		out = append(out, map[string]any{"type": "text", "text": string(runes[from:])})
	}
	return out
}

func tail(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[len(r)-n:])
}

func anthropicUsage(r *wire.Response) map[string]any {
	return wire.WithSpend(map[string]any{"input_tokens": r.Usage.InputTokens, "output_tokens": r.Usage.OutputTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		"server_tool_use": map[string]int{"web_search_requests": r.Usage.WebSearches, "web_fetch_requests": r.Usage.WebFetches}, "service_tier": "standard"}, r.Usage)
}

// anthropicFetchHistory reads an earlier turn's web_fetch_tool_result block: the page
// fetched (as a source), or the error's code.
func anthropicFetchHistory(id string, raw json.RawMessage) *wire.SearchResult {
	res := &wire.SearchResult{CallID: id, Sources: []wire.Source{}, Fetch: true}
	var c struct {
		Type      string `json:"type"`
		URL       string `json:"url"`
		ErrorCode string `json:"error_code"`
		Content   struct {
			Title string `json:"title"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Type == "web_fetch_tool_result_error" || c.URL == "" {
		res.Error = &wire.SearchError{Code: cmp.Or(c.ErrorCode, "unavailable")}
		return res
	}
	res.Sources = append(res.Sources, wire.Source{URL: c.URL, Title: c.Content.Title})
	res.Page = &wire.FetchedPage{URL: c.URL, Title: c.Content.Title}
	return res
}

// anthropicFetchResult renders a web_fetch result as Anthropic's
// web_fetch_tool_result block: a web_fetch_result with the page as a text document,
// or a web_fetch_tool_result_error. nil when res is a search's result.
func anthropicFetchResult(res *wire.SearchResult) map[string]any {
	var content any
	switch {
	case res.Page != nil:
		content = map[string]any{"type": "web_fetch_result", "url": res.Page.URL, "retrieved_at": res.Page.RetrievedAt,
			"content": map[string]any{"type": "document", "title": res.Page.Title,
				"source": map[string]string{"type": "text", "media_type": "text/plain", "data": res.Page.Text}}}
	case res.Error != nil && res.Fetch:
		content = map[string]string{"type": "web_fetch_tool_result_error", "error_code": res.Error.Code}
	default:
		return nil
	}
	return map[string]any{"type": "web_fetch_tool_result", "tool_use_id": serverToolID(res.CallID), "content": content}
}

func anthropicMessage(r *wire.Response, content []map[string]any, stop any) map[string]any {
	m := map[string]any{"id": r.ID, "type": "message", "role": "assistant", "model": r.Model, "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(r)}
	if ext := wire.Extension(r); ext != nil {
		m["searchfleet"] = ext
	}
	return m
}

// EncodeResponse renders r as a Messages response.
func (anthropicCodec) EncodeResponse(r *wire.Response) ([]byte, error) {
	stop := cmp.Or(anthropicStops[r.Stop], "end_turn")
	return json.Marshal(anthropicMessage(r, anthropicBlocks(r), stop))
}

func (anthropicCodec) NewStream() wire.Stream { return &anthropicStream{} }

// EncodeError renders the error a stream that has sent nothing answers with.
func (*anthropicStream) EncodeError(e *wire.Error) []byte { return Client.EncodeError(e) }

// anthropicStream renders an answer as Messages stream events: a server_tool_use
// block per search as it starts and its web_search_tool_result block when it ends (in
// the answer's order: a search's result block comes before the next search's block),
// then the text, cut into blocks at its citations exactly as the non-streamed answer
// is (textBlocks): each block's text arrives as text_delta events and its citations as
// citations_delta events as soon as their "[n]" markers are written; a block closes
// once the text goes on past its citations.
type anthropicStream struct {
	closed   int             // blocks started and stopped
	cursor   int             // the next Content part of an Update's answer to render
	used     map[string]bool // server calls whose block is out
	textBase int             // the index of the first text block (-1: none yet)
	open     bool            // block closed is a text block still open
	sent     string          // the open block's text sent
	cites    int             // the open block's citations sent
}

func anthropicEvent(typ string, fields map[string]any) wire.Event {
	fields["type"] = typ
	b, _ := json.Marshal(fields)
	return wire.Event{Name: typ, Data: b}
}

func (s *anthropicStream) Start(r *wire.Response) []wire.Event {
	s.used, s.textBase = map[string]bool{}, -1
	m := anthropicMessage(r, []map[string]any{}, nil)
	return []wire.Event{anthropicEvent("message_start", map[string]any{"message": m}), anthropicEvent("ping", map[string]any{})}
}

func (s *anthropicStream) KeepAlive() []wire.Event {
	return []wire.Event{anthropicEvent("ping", map[string]any{})}
}

// block renders one whole block at the next index.
func (s *anthropicStream) block(evs []wire.Event, b map[string]any) []wire.Event {
	i := s.closed
	s.closed++
	start := maps.Clone(b)
	var deltas []map[string]any
	switch b["type"] {
	case "server_tool_use", "tool_use":
		in, _ := json.Marshal(b["input"])
		start["input"] = map[string]any{}
		deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": string(in)})
	case "thinking":
		start["thinking"], start["signature"] = "", ""
		for _, piece := range pieces(b["thinking"].(string), 64) {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": piece})
		}
		deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": b["signature"]})
	case "text":
		start["text"] = ""
		if cs, ok := b["citations"].([]any); ok {
			start["citations"] = []any{}
			for _, c := range cs {
				deltas = append(deltas, map[string]any{"type": "citations_delta", "citation": c})
			}
		} else {
			delete(start, "citations")
		}
		for _, piece := range pieces(b["text"].(string), 64) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": piece})
		}
	}
	evs = append(evs, anthropicEvent("content_block_start", map[string]any{"index": i, "content_block": start}))
	for _, d := range deltas {
		evs = append(evs, anthropicEvent("content_block_delta", map[string]any{"index": i, "delta": d}))
	}
	return append(evs, anthropicEvent("content_block_stop", map[string]any{"index": i}))
}

// unresolved is the number of characters at the end of text that may still become a
// citation marker: a "[" and at most four digits.
func unresolved(text string) int {
	for n := 0; n <= 5 && n < len(text); n++ {
		c := text[len(text)-1-n]
		if c == '[' {
			return n + 1
		}
		if c < '0' || c > '9' {
			return 0
		}
	}
	return 0
}

// liveText renders the text part as far as it is written: the blocks textBlocks cuts
// it into, each opened, filled and closed as soon as that is certain. A cited block is
// certain once a character other than "[" follows its markers (another marker would
// join the group); text that may still become a marker is held back.
func (s *anthropicStream) liveText(evs []wire.Event, p wire.Part) []wire.Event {
	if s.textBase < 0 {
		s.textBase = s.closed
	}
	runes := []rune(p.Text)
	safe := len(runes) - unresolved(p.Text)
	blocks := textBlocks(p)
	start := 0
	for k, b := range blocks {
		text := []rune(b["text"].(string))
		end := start + len(text)
		from := start
		start = end
		if k < s.closed-s.textBase {
			continue
		}
		complete := k < len(blocks)-1 && runes[end] != '['
		if !s.open {
			s.open, s.sent, s.cites = true, "", 0
			evs = append(evs, anthropicEvent("content_block_start", map[string]any{"index": s.closed, "content_block": map[string]any{"type": "text", "text": ""}}))
		}
		cs, _ := b["citations"].([]any)
		for ; s.cites < len(cs); s.cites++ {
			evs = append(evs, anthropicEvent("content_block_delta", map[string]any{"index": s.closed, "delta": map[string]any{"type": "citations_delta", "citation": cs[s.cites]}}))
		}
		avail := string(runes[from:max(from, min(end, safe))])
		if rest, ok := strings.CutPrefix(avail, s.sent); ok && rest != "" {
			evs = append(evs, anthropicEvent("content_block_delta", map[string]any{"index": s.closed, "delta": map[string]any{"type": "text_delta", "text": rest}}))
			s.sent = avail
		}
		if !complete || s.sent != string(text) {
			return evs
		}
		evs = append(evs, anthropicEvent("content_block_stop", map[string]any{"index": s.closed}))
		s.closed++
		s.open = false
	}
	return evs
}

func (s *anthropicStream) Update(r *wire.Response) []wire.Event {
	var evs []wire.Event
	for s.cursor < len(r.Content) {
		p := r.Content[s.cursor]
		switch p.Kind {
		case wire.PartServerCall:
			if s.open {
				return evs // a search after the text: Finish renders it
			}
			if !s.used[p.Server.ID] {
				s.used[p.Server.ID] = true
				evs = s.block(evs, anthropicBlocks(&wire.Response{Content: []wire.Part{p}})[0])
			}
			// The next block must be this search's result.
			if s.cursor+1 >= len(r.Content) || r.Content[s.cursor+1].Kind != wire.PartServerResult {
				return evs
			}
			s.cursor++
		case wire.PartServerResult:
			if s.open {
				return evs
			}
			evs = s.block(evs, anthropicBlocks(&wire.Response{Content: []wire.Part{p}})[0])
			s.cursor++
		case wire.PartText:
			return s.liveText(evs, p)
		case wire.PartReasoning:
			if s.open {
				return evs
			}
			if b := clientThinkingBlock(p); b != nil {
				evs = s.block(evs, b)
			}
			s.cursor++
		default:
			return evs
		}
	}
	return evs
}

func (s *anthropicStream) Finish(r *wire.Response) []wire.Event {
	var evs []wire.Event
	blocks := anthropicBlocks(r)
	if s.textBase >= 0 {
		at := s.closed
		if s.open {
			at++
		}
		blocks = thinkingAfterText(blocks, s.textBase, at)
	}
	for i := s.closed; i < len(blocks); i++ {
		b := blocks[i]
		if !s.open {
			evs = s.block(evs, b)
			continue
		}
		// The open text block: its citations, then the rest of its text.
		s.open = false
		idx := s.closed
		s.closed++
		text, _ := b["text"].(string)
		rest, ok := strings.CutPrefix(text, s.sent)
		if cs, _ := b["citations"].([]any); b["type"] == "text" && ok && s.cites <= len(cs) {
			for _, c := range cs[s.cites:] {
				evs = append(evs, anthropicEvent("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "citations_delta", "citation": c}}))
			}
			for _, piece := range pieces(rest, 64) {
				evs = append(evs, anthropicEvent("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": piece}}))
			}
			evs = append(evs, anthropicEvent("content_block_stop", map[string]any{"index": idx}))
			continue
		}
		// The text sent does not begin this block (a model that wrote before it
		// searched): the block closes as it is, and the answer's blocks follow it.
		evs = append(evs, anthropicEvent("content_block_stop", map[string]any{"index": idx}))
		i--
	}
	if s.open {
		s.open = false
		evs = append(evs, anthropicEvent("content_block_stop", map[string]any{"index": s.closed}))
		s.closed++
	}
	stop := cmp.Or(anthropicStops[r.Stop], "end_turn")
	evs = append(evs, anthropicEvent("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": anthropicUsage(r)}))
	return append(evs, anthropicEvent("message_stop", map[string]any{}))
}

func (*anthropicStream) Fail(_ *wire.Response, e *wire.Error) []wire.Event {
	return []wire.Event{{Name: "error", Data: Client.EncodeError(e)}}
}

// anthropicSearchResult reads a web_search_tool_result block's content: the results
// (url, title, page_age), or the error object Anthropic puts in their place.
func anthropicSearchResult(toolUseID string, content json.RawMessage) *wire.SearchResult {
	res := &wire.SearchResult{CallID: toolUseID}
	var hits []struct {
		URL     string `json:"url"`
		Title   string `json:"title"`
		PageAge string `json:"page_age"`
	}
	if json.Unmarshal(content, &hits) == nil {
		for _, h := range hits {
			res.Sources = append(res.Sources, wire.Source{URL: h.URL, Title: h.Title, PageAge: h.PageAge})
		}
		return res
	}
	var e struct {
		ErrorCode string `json:"error_code"`
	}
	json.Unmarshal(content, &e)
	res.Error = &wire.SearchError{Code: e.ErrorCode}
	return res
}

// pieces cuts text into pieces of about n bytes on rune boundaries.
func pieces(text string, n int) []string {
	var out []string
	for len(text) > 0 {
		k := min(len(text), n)
		for k < len(text) && !utf8.RuneStart(text[k]) {
			k++
		}
		out = append(out, text[:k])
		text = text[k:]
	}
	return out
}
