package responses

import (
	"cmp"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// responsesOutput renders a response's output items.
func responsesOutput(r *wire.Response) []any {
	out := []any{}
	results := map[string]*wire.SearchResult{}
	for _, p := range r.Content {
		if p.Kind == wire.PartServerResult {
			results[p.Search.CallID] = p.Search
		}
	}
	var text []wire.Part
	written := false
	for _, p := range r.Content {
		switch p.Kind {
		case wire.PartServerCall:
			out = append(out, webSearchItem(r, p.Server, results[p.Server.ID], ""))
		case wire.PartText:
			text = append(text, p)
			written = written || p.Text != ""
		}
	}
	for _, it := range reasoningOutput(r) {
		out = append(out, it)
	}
	// An answer that ends in function calls has a message only if it wrote
	// something: an empty message item before the calls is none.
	if written || r.Stop != wire.StopToolUse {
		out = append(out, messageItem(r, text, "completed"))
	}
	for _, p := range r.Content {
		if p.Kind == wire.PartToolCall {
			out = append(out, functionCallItem(r, p.Call))
		}
	}
	return out
}

// The fleet's output item ids name the response they are part of (prefix, the
// response's id, then the item's own part), so a later request can refer to a stored
// response's item by its id alone (an item_reference) and the fleet finds it in that
// response: ItemResponse reads the response's id back. A response's message is
// msg_<response id>. A reasoning item keeps the id its Responses model gave it
// (reasoningOutput).
func itemID(prefix string, r *wire.Response, part string) string {
	return prefix + "_" + wire.IDToken(r.ID) + "_" + wire.IDToken(part)
}

// InputItemID is the id of the nth input item of response respID, of type typ, for
// an item its client sent without one: msg_<response id>_in<n> for a message (it
// names the response too).
func InputItemID(respID, typ string, n int) string {
	return cmp.Or(inputItemPrefixes[typ], "item") + "_" + wire.IDToken(respID) + "_in" + strconv.Itoa(n)
}

var inputItemPrefixes = map[string]string{"message": "msg", "function_call_output": "fco"}

// ItemResponse is the id of the response whose output item has id ("" for an id
// the fleet did not give an output item).
func ItemResponse(id string) string {
	_, rest, ok := strings.Cut(id, "_")
	if !ok || !strings.HasPrefix(rest, "resp_") {
		return ""
	}
	tail, _, _ := strings.Cut(rest[len("resp_"):], "_")
	if tail == "" {
		return ""
	}
	return "resp_" + tail
}

func webSearchItem(r *wire.Response, c *wire.ServerCall, res *wire.SearchResult, status string) map[string]any {
	sources := []any{}
	if status == "" {
		status = "completed"
		if res != nil && res.Error != nil {
			status = "failed"
		}
	}
	if res != nil {
		for _, s := range res.Sources {
			src := map[string]string{"type": "url", "url": s.URL}
			if s.Title != "" {
				// An addition to OpenAI's {type, url}: the SDKs keep unknown fields.
				src["title"] = s.Title
			}
			sources = append(sources, src)
		}
	}
	if c.IsFetch() {
		// A fetch is the Responses web_search_call's open_page action.
		return map[string]any{"type": "web_search_call", "id": itemID("ws", r, c.ID), "status": status,
			"action": map[string]any{"type": "open_page", "url": c.URL}}
	}
	return map[string]any{"type": "web_search_call", "id": itemID("ws", r, c.ID), "status": status,
		"action": map[string]any{"type": "search", "query": c.Query, "sources": sources}}
}

func functionCallItem(r *wire.Response, c *wire.ToolCall) map[string]any {
	return map[string]any{"type": "function_call", "id": itemID("fc", r, c.ID), "call_id": c.ID, "name": c.Name, "arguments": c.Arguments, "status": "completed"}
}

func messageID(r *wire.Response) string { return "msg_" + wire.IDToken(r.ID) }

// outputText joins text parts and turns their citations into url_citation
// annotations with character offsets into the joined text.
func outputText(text []wire.Part) map[string]any {
	anns := []any{}
	joined := wire.JoinCited(text, func(c wire.Citation, start, end int) {
		anns = append(anns, map[string]any{"type": "url_citation", "start_index": start, "end_index": end, "url": c.URL, "title": c.Title})
	})
	return map[string]any{"type": "output_text", "text": joined, "annotations": anns, "logprobs": []any{}}
}

func messageItem(r *wire.Response, text []wire.Part, status string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = append(content, outputText(text))
	}
	return map[string]any{"type": "message", "id": messageID(r), "status": status, "role": "assistant", "content": content}
}

// responseObject renders r as a Responses response object (every field of Open
// Responses' ResponseResource, with its type); output as given. The request's settings
// come from r.Echo, else their defaults.
func responseObject(r *wire.Response, output []any) map[string]any {
	status := cmp.Or(string(r.Status), string(wire.StatusCompleted))
	var incomplete, errBody, completedAt any
	if r.Status == wire.StatusCompleted || r.Status == "" {
		switch r.Stop {
		case wire.StopMaxTokens:
			status, incomplete = "incomplete", map[string]string{"reason": "max_output_tokens"}
		case wire.StopRefusal:
			status, incomplete = "incomplete", map[string]string{"reason": "content_filter"}
		}
		finished := r.Finished
		if finished.IsZero() {
			finished = r.Created
		}
		completedAt = finished.Unix()
	}
	if r.Error != nil {
		code := cmp.Or(r.Error.Code, "server_error")
		errBody = map[string]string{"code": code, "message": r.Error.Message}
	}
	o := map[string]any{
		"id": r.ID, "object": "response", "created_at": r.Created.Unix(), "completed_at": completedAt, "status": status, "model": r.Model,
		"output": output, "error": errBody, "incomplete_details": incomplete,
		"usage": wire.WithSpend(map[string]any{"input_tokens": r.Usage.InputTokens, "input_tokens_details": map[string]int{"cached_tokens": 0},
			"output_tokens": r.Usage.OutputTokens, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
			"total_tokens": r.Usage.InputTokens + r.Usage.OutputTokens}, r.Usage),
		"tool_usage": map[string]any{"web_search": map[string]int{"num_requests": r.Usage.WebSearches}},
	}
	for _, f := range responsesEchoFields {
		if v, ok := r.Echo[f.key]; ok {
			o[f.key] = v
		} else {
			o[f.key] = json.RawMessage(f.def)
		}
	}
	if v, ok := r.Echo["conversation"]; ok {
		o["conversation"] = v // only when the request named one
	}
	if r.Status != wire.StatusCompleted && r.Status != "" {
		o["usage"] = nil
	}
	if ext := wire.Extension(r); ext != nil {
		o["searchfleet"] = ext
	}
	return o
}

// responsesEchoFields are the request's settings a response object repeats, with the
// value each takes when the request left it out (the model's defaults as OpenAI
// reports them).
var responsesEchoFields = []struct{ key, def string }{
	{"previous_response_id", "null"}, {"instructions", "null"}, {"tools", "[]"}, {"tool_choice", `"auto"`},
	{"truncation", `"disabled"`}, {"parallel_tool_calls", "true"}, {"text", `{"format":{"type":"text"}}`},
	{"temperature", "1"}, {"top_p", "1"}, {"presence_penalty", "0"}, {"frequency_penalty", "0"}, {"top_logprobs", "0"},
	{"reasoning", `{"effort":null,"summary":null}`}, {"max_output_tokens", "null"}, {"max_tool_calls", "null"},
	{"store", "true"}, {"background", "false"}, {"service_tier", `"default"`}, {"metadata", "{}"},
	{"safety_identifier", "null"}, {"prompt_cache_key", "null"},
}

// Echo returns what a response object repeats of a Responses request body
// (one DecodeRequest accepted): each echoed field the request set, in the shape the
// response object gives it. Function tools get their optional fields (null when not
// sent), web_search tools their search_context_size, reasoning both its fields, and a
// service_tier of auto the tier that served it (default).
func Echo(body []byte) map[string]json.RawMessage {
	top, err := wire.JSONObject(body)
	if err != nil {
		return nil
	}
	echo := map[string]json.RawMessage{}
	for _, f := range responsesEchoFields {
		v, ok := top[f.key]
		if !ok || wire.IsNull(v) {
			continue
		}
		switch f.key {
		case "tools":
			v = echoTools(v)
		case "reasoning":
			v = withKeys(v, map[string]string{"effort": "null", "summary": "null"})
		case "text":
			v = echoText(v)
		case "service_tier":
			if string(v) == `"auto"` {
				v = json.RawMessage(`"default"`)
			}
		}
		echo[f.key] = v
	}
	return echo
}

// withKeys returns the object v with the keys of defs it lacks (or has null) set to
// their default.
func withKeys(v json.RawMessage, defs map[string]string) json.RawMessage {
	var o map[string]json.RawMessage
	if json.Unmarshal(v, &o) != nil || o == nil {
		return v
	}
	for k, d := range defs {
		if wire.IsNull(o[k]) {
			o[k] = json.RawMessage(d)
		}
	}
	return remarshal(v, o)
}

// remarshal is x encoded, or v when x does not encode.
func remarshal(v json.RawMessage, x any) json.RawMessage {
	b, err := json.Marshal(x)
	if err != nil {
		return v
	}
	return b
}

// echoText is text with its format, a json_schema format with its optional fields
// (description null, strict false when not sent).
func echoText(v json.RawMessage) json.RawMessage {
	var t map[string]json.RawMessage
	if json.Unmarshal(v, &t) != nil || t == nil {
		return v
	}
	if wire.IsNull(t["format"]) {
		t["format"] = json.RawMessage(`{"type":"text"}`)
	}
	var f struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(t["format"], &f) == nil && f.Type == "json_schema" {
		t["format"] = withKeys(t["format"], map[string]string{"description": "null", "strict": "false"})
	}
	return remarshal(v, t)
}

func echoTools(v json.RawMessage) json.RawMessage {
	var tools []json.RawMessage
	if json.Unmarshal(v, &tools) != nil {
		return v
	}
	out := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		var typ struct {
			Type string `json:"type"`
		}
		json.Unmarshal(t, &typ)
		switch {
		case typ.Type == "function":
			t = withKeys(t, map[string]string{"description": "null", "parameters": "null", "strict": "null"})
		case strings.HasPrefix(typ.Type, "web_search"):
			t = withKeys(t, map[string]string{"search_context_size": `"medium"`})
		}
		out = append(out, t)
	}
	return remarshal(v, out)
}

// EncodeResponse renders r as a Responses response: a web_search_call item per search
// (action search with its query and sources; status failed when it failed), the
// model's reasoning summaries as reasoning items (reasoningOutput), the message item with output_text and url_citation annotations, function_call items.
func (responsesCodec) EncodeResponse(r *wire.Response) ([]byte, error) {
	output := []any{}
	if r.Status == wire.StatusCompleted || r.Status == "" {
		output = responsesOutput(r)
	}
	return json.Marshal(responseObject(r, output))
}

func (responsesCodec) NewStream() wire.Stream { return &responsesStream{} }

// EncodeError renders the error a stream that has sent nothing answers with.
func (*responsesStream) EncodeError(e *wire.Error) []byte { return wire.OpenAIError(e) }

// responsesStream renders an answer as the Responses event sequence, each event with
// its sequence_number: a web_search_call item per search as it starts (in_progress,
// searching) and ends (completed, with its sources), the message item whose text
// arrives as output_text.delta events, its annotations when the answer is complete,
// then response.completed with the whole response.
type responsesStream struct {
	seq     int
	next    int            // the next output_index
	calls   map[string]int // a server call's output_index
	queries map[string]*wire.ServerCall
	done    map[string]bool // the calls whose item is done
	msg     int             // the message item's output_index (-1: not yet added)
	sent    string          // the text sent
	// holdText keeps the message item for Finish: the request asked for a reasoning
	// summary, and the reasoning items, known only when the answer is, come before
	// the message in the answer's output (responsesOutput), so they must be sent
	// before it too. Searches still stream as they run.
	holdText bool
}

func (s *responsesStream) ev(typ string, fields map[string]any) wire.Event {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, _ := json.Marshal(fields)
	return wire.Event{Name: typ, Data: b}
}

func (s *responsesStream) Start(r *wire.Response) []wire.Event {
	s.calls, s.queries, s.done, s.msg = map[string]int{}, map[string]*wire.ServerCall{}, map[string]bool{}, -1
	s.holdText = summaryAsked(r.Echo)
	rr := *r
	rr.Status = wire.StatusInProgress
	o := responseObject(&rr, []any{})
	return []wire.Event{s.ev("response.created", map[string]any{"response": o}), s.ev("response.in_progress", map[string]any{"response": o})}
}

func (s *responsesStream) KeepAlive() []wire.Event { return []wire.Event{{}} }

// search adds a web_search_call item: in progress, searching (a fetch's with its
// open_page action).
func (s *responsesStream) search(evs []wire.Event, r *wire.Response, c *wire.ServerCall) []wire.Event {
	idx := s.next
	s.next++
	s.calls[c.ID], s.queries[c.ID] = idx, c
	id := itemID("ws", r, c.ID)
	action := map[string]any{"type": "search", "query": c.Query}
	if c.IsFetch() {
		action = map[string]any{"type": "open_page", "url": c.URL} // a page read is never an empty search
	}
	added := map[string]any{"type": "web_search_call", "id": id, "status": "in_progress", "action": action}
	evs = append(evs, s.ev("response.output_item.added", map[string]any{"output_index": idx, "item": added}))
	for _, phase := range []string{"in_progress", "searching"} {
		evs = append(evs, s.ev("response.web_search_call."+phase, map[string]any{"output_index": idx, "item_id": id}))
	}
	return evs
}

// searched completes a web_search_call item.
func (s *responsesStream) searched(evs []wire.Event, r *wire.Response, res *wire.SearchResult) []wire.Event {
	idx, ok := s.calls[res.CallID]
	if !ok || s.done[res.CallID] {
		return evs
	}
	s.done[res.CallID] = true
	item := webSearchItem(r, s.queries[res.CallID], res, "")
	evs = append(evs, s.ev("response.web_search_call.completed", map[string]any{"output_index": idx, "item_id": item["id"]}))
	return append(evs, s.ev("response.output_item.done", map[string]any{"output_index": idx, "item": item}))
}

func (s *responsesStream) loc(r *wire.Response, m map[string]any) map[string]any {
	m["item_id"], m["output_index"], m["content_index"] = messageID(r), s.msg, 0
	return m
}

// text opens the message item and sends what text adds to the text sent, if it
// continues it; final (the answer) is sent past what it shares with it in any case.
func (s *responsesStream) text(evs []wire.Event, r *wire.Response, text string, final bool) []wire.Event {
	if s.msg < 0 {
		s.msg = s.next
		s.next++
		added := map[string]any{"type": "message", "id": messageID(r), "status": "in_progress", "role": "assistant", "content": []any{}}
		evs = append(evs, s.ev("response.output_item.added", map[string]any{"output_index": s.msg, "item": added}))
		evs = append(evs, s.ev("response.content_part.added", s.loc(r, map[string]any{"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})))
	}
	if rest, ok := wire.NewText(s.sent, text, final); ok {
		evs = append(evs, s.ev("response.output_text.delta", s.loc(r, map[string]any{"delta": rest, "logprobs": []any{}})))
		s.sent = text
	}
	return evs
}

func (s *responsesStream) Update(r *wire.Response) []wire.Event {
	var evs []wire.Event
	for _, p := range r.Content {
		switch p.Kind {
		case wire.PartServerCall:
			// A search that starts after the text (a model that wrote before it
			// searched) cannot be put before the message item: Finish adds it.
			if _, ok := s.calls[p.Server.ID]; !ok && s.msg < 0 {
				evs = s.search(evs, r, p.Server)
			}
		case wire.PartServerResult:
			evs = s.searched(evs, r, p.Search)
		case wire.PartText:
			// No message item is opened for no text: an answer that ends in function
			// calls without writing has none (responsesOutput).
			if !s.holdText && p.Text != "" {
				evs = s.text(evs, r, p.Text, false)
			}
		}
	}
	return evs
}

func (s *responsesStream) Finish(r *wire.Response) []wire.Event {
	var evs []wire.Event
	final := responsesOutput(r)
	if s.msg >= 0 {
		final = reasoningAfterMessage(final)
	}
	results := map[string]*wire.SearchResult{}
	for _, p := range r.Content {
		switch p.Kind {
		case wire.PartServerCall:
			if _, ok := s.calls[p.Server.ID]; !ok {
				evs = s.search(evs, r, p.Server)
			}
		case wire.PartServerResult:
			results[p.Search.CallID] = p.Search
		}
	}
	for _, p := range r.Content {
		if p.Kind == wire.PartServerCall {
			res := results[p.Server.ID]
			if res == nil {
				res = &wire.SearchResult{CallID: p.Server.ID, Sources: []wire.Source{}}
			}
			evs = s.searched(evs, r, res)
		}
	}
	for _, item := range final {
		it := item.(map[string]any)
		id, _ := it["id"].(string)
		switch it["type"] {
		case "message":
			part := it["content"].([]any)[0].(map[string]any)
			text := part["text"].(string)
			evs = s.text(evs, r, text, true)
			for n, a := range part["annotations"].([]any) {
				evs = append(evs, s.ev("response.output_text.annotation.added", s.loc(r, map[string]any{"annotation_index": n, "annotation": a})))
			}
			evs = append(evs, s.ev("response.output_text.done", s.loc(r, map[string]any{"text": text, "logprobs": []any{}})))
			evs = append(evs, s.ev("response.content_part.done", s.loc(r, map[string]any{"part": part})))
			evs = append(evs, s.ev("response.output_item.done", map[string]any{"output_index": s.msg, "item": it}))
		case "reasoning":
			evs = s.reasoning(evs, it)
		case "function_call":
			idx := s.next
			s.next++
			added := maps.Clone(it)
			added["arguments"], added["status"] = "", "in_progress"
			evs = append(evs, s.ev("response.output_item.added", map[string]any{"output_index": idx, "item": added}))
			evs = append(evs, s.ev("response.function_call_arguments.delta", map[string]any{"output_index": idx, "item_id": id, "delta": it["arguments"]}))
			evs = append(evs, s.ev("response.function_call_arguments.done", map[string]any{"output_index": idx, "item_id": id, "arguments": it["arguments"], "name": it["name"]}))
			evs = append(evs, s.ev("response.output_item.done", map[string]any{"output_index": idx, "item": it}))
		}
	}
	typ := "response.completed"
	o := responseObject(r, final)
	if o["status"] == "incomplete" {
		typ = "response.incomplete"
	}
	return append(evs, s.ev(typ, map[string]any{"response": o}))
}

// reasoningAfterMessage moves the reasoning items of output to after the message item:
// a stream that already opened the message (its text streamed as the model wrote it,
// before its reasoning was known: no summary was asked for, so none was expected)
// adds them after it, and the output says so.
func reasoningAfterMessage(output []any) []any {
	var reasoning, rest []any
	for _, it := range output {
		if it.(map[string]any)["type"] == "reasoning" {
			reasoning = append(reasoning, it)
			continue
		}
		rest = append(rest, it)
	}
	if len(reasoning) == 0 {
		return output
	}
	for i, it := range rest {
		if it.(map[string]any)["type"] == "message" {
			return append(append(rest[:i+1:i+1], reasoning...), rest[i+1:]...)
		}
	}
	return append(rest, reasoning...)
}

// reasoning sends a reasoning item as OpenAI streams one: added with an empty
// summary, then each summary part added, its text as one delta, done, then the item
// done.
func (s *responsesStream) reasoning(evs []wire.Event, it map[string]any) []wire.Event {
	idx := s.next
	s.next++
	id := it["id"]
	evs = append(evs, s.ev("response.output_item.added", map[string]any{"output_index": idx,
		"item": map[string]any{"type": "reasoning", "id": id, "summary": []any{}}}))
	for n, part := range it["summary"].([]any) {
		text := part.(map[string]any)["text"].(string)
		at := func(m map[string]any) map[string]any {
			m["item_id"], m["output_index"], m["summary_index"] = id, idx, n
			return m
		}
		evs = append(evs, s.ev("response.reasoning_summary_part.added", at(map[string]any{"part": summaryText("")})))
		evs = append(evs, s.ev("response.reasoning_summary_text.delta", at(map[string]any{"delta": text})))
		evs = append(evs, s.ev("response.reasoning_summary_text.done", at(map[string]any{"text": text})))
		evs = append(evs, s.ev("response.reasoning_summary_part.done", at(map[string]any{"part": summaryText(text)})))
	}
	return append(evs, s.ev("response.output_item.done", map[string]any{"output_index": idx, "item": it}))
}

func (s *responsesStream) Fail(r *wire.Response, e *wire.Error) []wire.Event {
	rr := *r
	rr.Status, rr.Error = wire.StatusFailed, e
	if e.Status == http.StatusGatewayTimeout && e.Code == "" {
		rr.Error = &wire.Error{Status: e.Status, Code: "timeout", Message: e.Message}
	}
	return []wire.Event{s.ev("response.failed", map[string]any{"response": responseObject(&rr, []any{})})}
}
