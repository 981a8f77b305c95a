package responses

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Model is the OpenAI Responses protocol as the fleet speaks it to a main
// model: POST {base}/responses (base ".../v1", as for Chat) with a bearer key. The
// fleet sends the whole conversation each time, with store false.
var Model responsesModel

type responsesModel struct{ wire.OpenAIAPI }

func (responsesModel) Protocol() wire.Protocol { return wire.OpenAIResponses }

// NativeSearch: OpenAI's web_search tool is $10 per 1,000 calls
// (openai.com/api/pricing, built-in tools: web search for reasoning and GPT-5 models).
func (responsesModel) NativeSearch(string) (string, float64, bool) {
	return string(wire.OpenAIResponses), 0.01, true
}

func (responsesModel) TakesFile(media string) bool    { return media == wire.MediaPDF }
func (responsesModel) TakesFileURL(media string) bool { return media == wire.MediaPDF }

func (responsesModel) Path(string, bool) string { return "/responses" }

// EncodeRequest renders r as a Responses request: instructions, input items (messages,
// function_call and function_call_output items with the call ids), function tools
// ({type:"function", name, parameters}, strict only when the client asked).
func (responsesModel) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	r, err := wire.ModelFiles(r, Model, model)
	if err != nil {
		return nil, err
	}
	out := wire.TopLevel{}
	out.Set("model", model)
	out.Set("store", false)
	if r.System != "" {
		out.Set("instructions", r.System)
	}
	var input []any
	for _, m := range r.Messages {
		if m.Role == wire.RoleAssistant {
			m.Parts = reasoningFirst(m.Parts)
		}
		var text []wire.Part
		flush := func() {
			if len(text) == 0 {
				return
			}
			role := string(m.Role)
			if m.Role == wire.RoleTool {
				role = "user"
			}
			input = append(input, map[string]any{"role": role, "content": responsesInputContent(text, m.Role == wire.RoleAssistant)})
			text = nil
		}
		for _, p := range m.Parts {
			switch p.Kind {
			case wire.PartText, wire.PartImage, wire.PartFile:
				if p.Kind == wire.PartText && p.Text == "" {
					continue
				}
				text = append(text, p)
			case wire.PartServerCall, wire.PartServerResult:
				text = append(text, wire.Part{Kind: wire.PartText, Text: wire.RenderServerPart(p)})
			case wire.PartReasoning:
				// The model's own reasoning items go back as they came, before the
				// calls they led to; another protocol's reasoning cannot.
				if it := reasoningItem(p); it != nil {
					flush()
					input = append(input, it)
				}
			case wire.PartToolCall:
				flush()
				input = append(input, map[string]string{"type": "function_call", "call_id": p.Call.ID, "name": p.Call.Name, "arguments": p.Call.Arguments})
			case wire.PartToolResult:
				flush()
				input = append(input, map[string]string{"type": "function_call_output", "call_id": p.Result.CallID, "output": wire.ResultText(p.Result)})
			}
		}
		flush()
	}
	if len(input) == 0 {
		return nil, wire.Invalid("input", "the conversation has no content for the model")
	}
	out.Set("input", input)
	var tools []any
	if o := r.Search; o != nil {
		// The provider's own search: its web_search tool, asked to list the pages each
		// search found (the job's trace shows them).
		tools = append(tools, responsesSearchTool(o))
		out.Set("include", []string{"web_search_call.action.sources"})
		out.Set("tools", tools)
		out.Set("tool_choice", "auto") // forcing the hosted tool is refused by some models
	}
	if len(r.Tools) > 0 {
		for _, t := range r.Tools {
			// Responses function tools are strict unless told otherwise, and a strict
			// schema must list every property as required: only the client may ask.
			tool := t.Decl("parameters")
			tool["type"], tool["strict"] = "function", t.Strict != nil && *t.Strict
			tools = append(tools, tool)
		}
		out.Set("tools", tools)
		out.SetToolChoice(r, func(name string) any { return map[string]string{"type": "function", "name": name} })
	}
	if r.MaxTokens > 0 {
		out.Set("max_output_tokens", r.MaxTokens)
	}
	out.SetSampling(r)
	if f := wire.ResponsesFormat(r.ResponseFormat); f != nil {
		out.Set("text", map[string]any{"format": f})
	}
	if r.Stream {
		out.Set("stream", true)
	}
	reasoningConfig(out, r)
	return json.Marshal(out)
}

// reasoningFirst puts the reasoning parts that end an assistant message before the
// text they follow: a streamed answer gives its reasoning items after the message
// (its text streamed before its reasoning was known), and a client sends them back so,
// but OpenAI refuses a reasoning item that no item of its turn follows. parts is not
// modified.
func reasoningFirst(parts []wire.Part) []wire.Part {
	k := len(parts)
	for k > 0 && parts[k-1].Kind == wire.PartReasoning {
		k--
	}
	j := k
	for j > 0 && parts[j-1].Kind == wire.PartText {
		j--
	}
	if k == len(parts) || j == k {
		return parts
	}
	out := make([]wire.Part, 0, len(parts))
	out = append(append(append(out, parts[:j]...), parts[k:]...), parts[j:k]...)
	return out
}

// responsesSearchTool is OpenAI's web_search tool with a request's settings: allowed
// domains as its filters (the web_search_preview tool, o.Tool, has none), the country
// as an approximate user_location, the context size.
func responsesSearchTool(o *llm.SearchOptions) map[string]any {
	t := map[string]any{"type": "web_search"}
	if o.Tool != "" {
		t["type"] = o.Tool
	}
	if len(o.AllowedDomains) > 0 && t["type"] == "web_search" {
		t["filters"] = map[string]any{"allowed_domains": o.AllowedDomains}
	}
	if o.Country != "" {
		t["user_location"] = map[string]string{"type": "approximate", "country": strings.ToUpper(o.Country)}
	}
	if o.ContextSize != "" {
		t["search_context_size"] = o.ContextSize
	}
	return t
}

// responsesInputContent renders a message's text and images: a string when it is
// text only, else input parts (an assistant's earlier text is output_text).
func responsesInputContent(parts []wire.Part, assistant bool) any {
	if assistant || wire.TextOnly(parts) {
		return wire.JoinText(parts)
	}
	return responsesInputParts(parts)
}

// responsesInputParts renders a message's text, images and files as input_text,
// input_image and input_file parts, each with only its own fields.
func responsesInputParts(parts []wire.Part) []map[string]string {
	var items []map[string]string
	for _, p := range parts {
		switch p.Kind {
		case wire.PartText:
			items = append(items, map[string]string{"type": "input_text", "text": p.Text})
		case wire.PartImage:
			items = append(items, map[string]string{"type": "input_image", "image_url": p.Image.URLOrData()})
		case wire.PartFile:
			if p.File.Data == "" && p.File.URL != "" { // a file it takes by URL (TakesFileURL)
				items = append(items, map[string]string{"type": "input_file", "file_url": p.File.URL})
				continue
			}
			items = append(items, map[string]string{"type": "input_file", "filename": p.File.Name(), "file_data": p.File.DataURL()})
		}
	}
	return items
}

// responsesAnswer is a response object as the model codec reads it.
type responsesAnswer struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Output []responsesOutputItem `json:"output"`
	Usage  struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	ToolUsage *struct {
		WebSearch *struct {
			NumRequests int `json:"num_requests"`
		} `json:"web_search"`
	} `json:"tool_usage"`
}

// responsesFailed is the HTTP status a failed response's error code stands for.
var responsesFailed = map[string]int{"rate_limit_exceeded": http.StatusTooManyRequests, "insufficient_quota": http.StatusTooManyRequests,
	"invalid_api_key": http.StatusUnauthorized, "server_error": http.StatusInternalServerError, "vector_store_timeout": http.StatusGatewayTimeout}

// responsesOutputItem is one output item of a response.
type responsesOutputItem struct {
	Type      string                   `json:"type"`
	ID        string                   `json:"id"`
	Status    string                   `json:"status"`
	CallID    string                   `json:"call_id"`
	Name      string                   `json:"name"`
	Arguments string                   `json:"arguments"`
	Content   []responsesOutputContent `json:"content"`
	// Summary and EncryptedContent are a reasoning item's.
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
	EncryptedContent string           `json:"encrypted_content"`
	Action           *responsesAction `json:"action"`
}

// responsesAction is a web_search_call item's action: a search (its query or queries
// and the sources it read), an open_page (url) or a find_in_page (pattern).
type responsesAction struct {
	Type    string   `json:"type"`
	Query   string   `json:"query"`
	Queries []string `json:"queries"`
	URL     string   `json:"url"`
	Pattern string   `json:"pattern"`
	Sources []struct {
		URL string `json:"url"`
	} `json:"sources"`
}

type responsesOutputContent struct {
	Type        string                `json:"type"`
	Text        string                `json:"text"`
	Refusal     string                `json:"refusal"`
	Annotations []responsesAnnotation `json:"annotations"`
}

// responsesAnnotation is an output_text annotation: a url_citation's offsets are code
// point offsets of the cited span (OpenAI's own inline markdown link to the page).
type responsesAnnotation struct {
	Type       string `json:"type"`
	URL        string `json:"url"`
	Title      string `json:"title"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
}

// DecodeResponse reads a response object: message items' output_text (with
// url_citation annotations) and refusals, function_call items as tool calls (their
// call_id is the id the result must name), the provider's own web_search_call items,
// usage, and the stop reason (incomplete for max_output_tokens or content_filter).
func (responsesModel) DecodeResponse(body []byte) (*wire.Response, error) {
	var a responsesAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("not a Responses API response: %s", wire.Clip(err.Error(), 200))
	}
	if a.Object != "" && a.Object != "response" {
		return nil, fmt.Errorf("not a Responses API response: object %q", a.Object)
	}
	if a.Status == "" && a.Output == nil {
		return nil, fmt.Errorf("not a Responses API response (no status, no output)")
	}
	return a.response()
}

func (a *responsesAnswer) response() (*wire.Response, error) {
	if a.Status == "failed" {
		msg, code := "the model's response failed", ""
		if a.Error != nil {
			msg, code = cmp.Or(a.Error.Message, msg), a.Error.Code
		}
		le := wire.StatusError(cmp.Or(responsesFailed[code], http.StatusBadGateway), "response_failed", msg)
		le.Code = code
		return nil, le
	}
	r := &wire.Response{ID: a.ID, Model: a.Model, Status: wire.StatusCompleted, Stop: wire.StopEndTurn,
		Usage: wire.Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	for _, it := range a.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					p := wire.Part{Kind: wire.PartText, Text: c.Text}
					for _, an := range c.Annotations {
						if an.Type == "url_citation" {
							p.Citations = append(p.Citations, urlCitation(c.Text, an))
						}
					}
					r.Content = append(r.Content, p)
				case "refusal":
					r.Content = append(r.Content, wire.Part{Kind: wire.PartText, Text: c.Refusal})
					r.Stop, r.StopDetail = wire.StopRefusal, "refusal"
				}
			}
		case "function_call":
			id := cmp.Or(it.CallID, it.ID)
			r.Content = append(r.Content, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: id, Name: it.Name, Arguments: it.Arguments}})
		case "reasoning":
			rs := &wire.Reasoning{Protocol: wire.OpenAIResponses, ID: it.ID, Encrypted: it.EncryptedContent}
			for _, sm := range it.Summary {
				rs.Summary = append(rs.Summary, sm.Text)
			}
			rs.Text = strings.Join(rs.Summary, "\n\n")
			r.Content = append(r.Content, wire.Part{Kind: wire.PartReasoning, Reasoning: rs})
		case "web_search_call":
			call, res := it.webSearch()
			r.Content = append(r.Content, wire.Part{Kind: wire.PartServerCall, Server: call}, wire.Part{Kind: wire.PartServerResult, Search: res})
			if it.Status == "completed" {
				r.Usage.WebSearches++ // OpenAI bills each web_search call that ran
			}
		}
	}
	if tu := a.ToolUsage; tu != nil && tu.WebSearch != nil {
		r.Usage.SearchesReported = tu.WebSearch.NumRequests
	}
	if a.Status == "incomplete" {
		r.StopDetail = "incomplete"
	}
	if a.Status == "incomplete" && a.IncompleteDetails != nil {
		r.StopDetail = "incomplete: " + a.IncompleteDetails.Reason
		switch a.IncompleteDetails.Reason {
		case "max_output_tokens":
			r.Stop = wire.StopMaxTokens
		case "content_filter":
			r.Stop = wire.StopRefusal
		}
	}
	for _, p := range r.Content {
		if p.Kind == wire.PartToolCall {
			r.Stop = wire.StopToolUse
		}
	}
	return r, nil
}

// urlCitation reads a url_citation of text. Its indices count code points, and the
// span they give normally is the markdown link the model appended ("([host](url))"):
// the span stands when it holds the cited URL or its host. Otherwise the link is
// looked up in the text (the occurrence nearest the given end, with or without
// OpenAI's tracking parameter) and the span ends after its closing parentheses;
// failing that, the given span stands, and an empty one ends with the text.
func urlCitation(text string, an responsesAnnotation) wire.Citation {
	c := wire.Citation{URL: an.URL, Title: an.Title, Start: an.StartIndex, End: an.EndIndex}
	s, e := runeOffset(text, an.StartIndex), runeOffset(text, an.EndIndex)
	host := ""
	if u, err := url.Parse(an.URL); err == nil {
		host = strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
	}
	if an.StartIndex < an.EndIndex && s < e {
		if span := text[s:e]; strings.Contains(span, an.URL) || (host != "" && strings.Contains(strings.ToLower(span), host)) {
			return c
		}
	}
	for _, u := range []string{an.URL, PageURL(an.URL)} {
		if p, ok := wire.NearestEnd(text, u, e); ok {
			for i := 0; i < 2 && p < len(text) && text[p] == ')'; i++ {
				p++
			}
			c.End = utf8.RuneCountInString(text[:p])
			c.Start = min(c.Start, c.End)
			return c
		}
	}
	if an.StartIndex >= an.EndIndex {
		c.End = utf8.RuneCountInString(text)
	}
	return c
}

// runeOffset is the byte offset of code point n of text (clamped to the text).
func runeOffset(text string, n int) int {
	b := 0
	for ; n > 0 && b < len(text); n-- {
		_, size := utf8.DecodeRuneInString(text[b:])
		b += size
	}
	return b
}

// PageURL is the page a URL OpenAI cites stands for: without the
// utm_source=openai tracking parameter OpenAI adds to cited URLs (and not to the pages
// its search lists), so that both name one page.
func PageURL(raw string) string {
	if !strings.Contains(raw, "utm_source=openai") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	v := u.Query()
	if v.Get("utm_source") != "openai" {
		return raw
	}
	v.Del("utm_source")
	u.RawQuery = v.Encode()
	return u.String()
}

// webSearch reads a web_search_call item as the provider's search and what it found:
// a search's query (its first when it ran several), an opened page or a search in a
// page as words naming the page; the pages listed when the request included
// web_search_call.action.sources. A failed call is a failed search.
func (it *responsesOutputItem) webSearch() (*wire.ServerCall, *wire.SearchResult) {
	call := &wire.ServerCall{ID: it.ID, Name: "web_search"}
	res := &wire.SearchResult{CallID: it.ID}
	if a := it.Action; a != nil {
		call.Action = a.Type
		switch a.Type {
		case "open_page":
			call.Query = "open_page " + a.URL
		case "find_in_page":
			call.Query = fmt.Sprintf("find_in_page %q in %s", a.Pattern, a.URL)
		default:
			call.Query = a.Query
			if call.Query == "" && len(a.Queries) > 0 {
				call.Query = a.Queries[0]
			}
		}
		for _, s := range a.Sources {
			if s.URL != "" {
				res.Sources = append(res.Sources, wire.Source{URL: s.URL})
			}
		}
		if a.URL != "" && len(res.Sources) == 0 {
			res.Sources = append(res.Sources, wire.Source{URL: a.URL})
		}
	}
	if it.Status == "failed" {
		res.Error = &wire.SearchError{Code: "unavailable", Message: "the provider's web search failed"}
	}
	return call, res
}

func (responsesModel) NewStreamDecoder() wire.StreamDecoder {
	return &responsesDecoder{notes: map[string][]responsesAnnotation{}}
}

// responsesDecoder reads a Responses stream: the text of response.output_text.delta
// events as it comes, the whole answer from response.completed (or
// response.incomplete); response.failed and error events are errors. The output
// items the stream completed (response.output_item.done) and the citations it added
// (response.output_text.annotation.added) stand in for a final response that lists no
// output or no annotations.
type responsesDecoder struct {
	final *wire.Response
	items []responsesOutputItem
	notes map[string][]responsesAnnotation // item id and content index → annotations
}

func (d *responsesDecoder) Event(name string, data []byte) (string, error) {
	var ev struct {
		Type         string               `json:"type"`
		Delta        string               `json:"delta"`
		Response     *responsesAnswer     `json:"response"`
		Item         *responsesOutputItem `json:"item"`
		ItemID       string               `json:"item_id"`
		ContentIndex int                  `json:"content_index"`
		Annotation   *responsesAnnotation `json:"annotation"`
		Code         string               `json:"code"`
		Message      string               `json:"message"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return "", fmt.Errorf("unreadable Responses stream event: %s", wire.Clip(err.Error(), 200))
	}
	switch ev.Type {
	case "response.output_text.delta":
		return ev.Delta, nil
	case "response.output_item.done":
		if ev.Item != nil {
			d.items = append(d.items, *ev.Item)
		}
	case "response.output_text.annotation.added":
		if ev.Annotation != nil {
			k := fmt.Sprintf("%s/%d", ev.ItemID, ev.ContentIndex)
			d.notes[k] = append(d.notes[k], *ev.Annotation)
		}
	case "response.completed", "response.incomplete", "response.failed":
		if ev.Response == nil {
			return "", wire.StatusError(http.StatusBadGateway, "", ev.Type+" has no response")
		}
		d.complete(ev.Response)
		r, err := ev.Response.response()
		if err != nil {
			return "", err
		}
		d.final = r
	case "error":
		status := http.StatusBadGateway
		if strings.Contains(ev.Code, "rate_limit") {
			status = http.StatusTooManyRequests
		}
		return "", wire.StatusError(status, ev.Code, ev.Message)
	}
	return "", nil
}

// complete fills in a final response from the stream's items and annotations where
// it lacks them.
func (d *responsesDecoder) complete(a *responsesAnswer) {
	if len(a.Output) == 0 {
		a.Output = d.items
	}
	for i := range a.Output {
		it := &a.Output[i]
		for j := range it.Content {
			if c := &it.Content[j]; len(c.Annotations) == 0 && c.Type == "output_text" {
				c.Annotations = d.notes[fmt.Sprintf("%s/%d", it.ID, j)]
			}
		}
	}
}

func (d *responsesDecoder) Response() (*wire.Response, error) {
	if d.final == nil {
		return nil, wire.StatusError(http.StatusBadGateway, "", "the model's stream ended before response.completed")
	}
	return d.final, nil
}
