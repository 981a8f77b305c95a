package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The scripted main model speaks OpenAI chat completions. Its script:
//
//   - The last message is a user message and a web_search tool is offered: it calls
//     web_search with the user's text as the query when the text asks for something
//     (a question mark, a search or freshness word, Chinese search words, or
//     "sim:search"), unless the text says "sim:nosearch".
//   - The last messages are tool results: it answers from them, citing the numbered
//     sources it was given ("[n]"), or calls web_search again while the chain has made
//     fewer hops than "sim:hops=N" asks.
//   - Otherwise it answers plainly.
//
// Directives in the user's text steer it: "sim:calls=N" (N parallel web_search calls),
// "sim:engine=ID" (name the engine), "sim:badargs" (malformed arguments JSON),
// "sim:badkey" (an unknown argument), "sim:emptyquery" (a blank query),
// "sim:tool=NAME" (call the client's tool NAME instead; without it, a client tool
// whose name names what the user asks about, get_weather for "what's the weather",
// is called with its required arguments filled in), "sim:repeat-search" (each
// "sim:hops=N" follow-up repeats the first search exactly; a forced tool_choice, a
// function or "required", is honoured when the user has just spoken), "sim:fresh-query" (the
// first search's query is new every time), "sim:bad-cite" (the answer
// also cites [97], a source it was never given), "sim:fetch" (when web_fetch is
// offered: fetch the first URL of the user's text, or, with none there, the first
// source of the search results it read, once), and model faults
// "sim:model-429", "sim:model-500", "sim:model-hang", "sim:model-slow=1s".
//
// With "stream": true the same answer arrives as chat.completion.chunk events, a
// token at a time, "sim:token-delay=DUR" apart (see stream.go).

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []llm.Message `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Tools      []chatTool      `json:"tools"`
	// ReasoningEffort and Thinking ask for reasoning (chatReasoningOn).
	ReasoningEffort string `json:"reasoning_effort"`
	Thinking        *struct {
		Type string `json:"type"`
	} `json:"thinking"`
}

// modelFaults are the model directives of the user's text ("sim:model-429") as the
// faults they apply ("sim:429").
func modelFaults(user string) string {
	return strings.ReplaceAll(strings.Join(modelDirectiveRE.FindAllString(user, -1), " "), "sim:model-", "sim:")
}

// chatTool is one tool of a chat request: a function, or a provider's own search
// (GLM's {"type":"web_search","web_search":{…}}, Kimi's builtin_function).
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
	WebSearch json.RawMessage `json:"web_search,omitempty"`
}

var (
	modelDirectiveRE = regexp.MustCompile(`sim:model-(\S+)`)
	callsRE          = regexp.MustCompile(`sim:calls=(\d+)`)
	hopsRE           = regexp.MustCompile(`sim:hops=(\d+)`)
	engineRE         = regexp.MustCompile(`sim:engine=([A-Za-z0-9_-]+)`)
	toolRE           = regexp.MustCompile(`sim:tool=([A-Za-z0-9_-]+)`)
	sourceLineRE     = regexp.MustCompile(`(?m)^\[(\d+)\] (.+) \((https?://[^\s)]+)\)$`)
	searchWords      = []string{"?", "？", "search", "find", "look up", "latest", "news", "today", "current", "weather", "price", "who ", "what ", "when ", "搜", "查", "新闻", "最新", "谷歌", "百度", "sim:search"}
)

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, []byte(`{"object":"list","data":[{"id":"sim-scripted","object":"model","created":0,"owned_by":"searchfleet-simulator"}]}`))
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, []byte(`{"error":{"message":"simulator: body must be a chat completion request with messages","type":"invalid_request_error","param":"messages","code":null}}`))
		return
	}
	if slices.ContainsFunc(req.Tools, func(t chatTool) bool { return t.Function.Name == "web_fetch" }) {
		s.stats.count("model_offered_web_fetch", body, "")
	}
	user, id, ok := s.admit(w, r, body, req, nil, between(s.opts.ModelLatency, s.opts.ModelLatencyMax, body))
	if !ok {
		return
	}
	if !clientToolTurn(req, user) && s.nativeChat(w, r, req, user, id) { // Kimi's and GLM's own search (sim_model_chatsearch.go)
		return
	}
	// A reasoning model thinks whether its answer is streamed or not.
	reasoning := chatReasoningOn(req)
	if reasoning && !s.reasoningPasses(w, string(body), body, chatReasoningError, func(e *wire.Error) []byte {
		return mustJSON(map[string]any{"error": map[string]any{"message": e.Message, "type": "invalid_request_error"}})
	}) {
		return
	}
	msg, finish := script(req, user, id)
	if reasoning {
		msg = withReasoningContent(msg, user, id)
	}
	writeChat(w, r, req, user, id, msg, finish, scriptUsage(msg, len(body)/4), true)
}

// scriptUsage is the usage of a scripted answer msg to a prompt of prompt tokens.
func scriptUsage(msg map[string]any, prompt int) map[string]int {
	u := map[string]int{"prompt_tokens": prompt, "completion_tokens": len(fmt.Sprint(msg["content"]))/4 + 1}
	u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
	return u
}

// writeChat writes msg and finish as a chat completion, streamed when req asks. The
// scripted main model's whole answer (full) also has system_fingerprint and logprobs.
func writeChat(w http.ResponseWriter, r *http.Request, req chatRequest, user, id string, msg map[string]any, finish string, usage map[string]int, full bool) {
	h := chunkHeader{ID: "chatcmpl-sim-" + id, Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: req.Model, SystemFingerprint: "searchfleet-simulator"}
	if req.Stream {
		streamAnswer(w, r, h, msg, finish, usage, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, tokenDelay(user))
		return
	}
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": finish}
	out := map[string]any{"id": h.ID, "object": "chat.completion", "created": h.Created, "model": req.Model, "choices": []any{choice}, "usage": usage}
	if !full {
		writeJSON(w, mustJSON(out))
		return
	}
	choice["logprobs"], out["system_fingerprint"] = nil, h.SystemFingerprint
	writeJSON(w, append(mustJSON(out), '\n')) // as json.Encoder writes it
}

// script decides the model's next message and finish reason.
func script(req chatRequest, user, id string) (map[string]any, string) {
	var webSearch *json.RawMessage
	tools := map[string]bool{}
	for i, t := range req.Tools {
		tools[t.Function.Name] = true
		if t.Function.Name == "web_search" {
			webSearch = &req.Tools[i].Function.Parameters
		}
	}
	if msg, ok := researchBrain(req); ok { // a research run's brain (sim_research.go)
		return msg, "stop"
	}
	last := req.Messages[len(req.Messages)-1]

	if last.Role == "tool" && tools["web_fetch"] && strings.Contains(user, "sim:fetch") && !fetched(req.Messages) {
		// A search's results are in: read the first page they name.
		if m := sourceLineRE.FindStringSubmatch(llm.Text(last.Content)); m != nil {
			return fetchCall(m[3], id), "tool_calls"
		}
	}
	if last.Role == "tool" {
		// The answer draws on every result since the user spoke (each hop's), as a
		// model reads all of them; answerFrom cites the first few.
		hops, results := 0, []string{}
		for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != "user"; i-- {
			switch m := req.Messages[i]; {
			case m.Role == "assistant" && len(m.ToolCalls) > 0:
				hops++
			case m.Role == "tool":
				results = append([]string{llm.Text(m.Content)}, results...)
			}
		}
		if m := hopsRE.FindStringSubmatch(user); m != nil && webSearch != nil {
			if want, _ := strconv.Atoi(m[1]); hops < want {
				q := fmt.Sprintf("%s (follow-up %d)", user, hops)
				if strings.Contains(user, "sim:repeat-search") {
					q = user // the same search again, as models do
				}
				return searchCalls(*webSearch, user, q, id), "tool_calls"
			}
		}
		answer := answerFrom(results)
		if strings.Contains(user, "sim:bad-cite") {
			// A model that cites a source it was never given, as real ones do.
			answer += " Some say otherwise [97]."
		}
		return map[string]any{"role": "assistant", "content": answer}, "stop"
	}

	if last.Role == "user" {
		if u := urlRE.FindString(user); u != "" && tools["web_fetch"] && strings.Contains(user, "sim:fetch") {
			return fetchCall(strings.TrimRight(u, ".,;:!?"), id), "tool_calls"
		}
		if name := forcedTool(req.ToolChoice, req.Tools); name != "" {
			// A forced tool_choice is honoured, as the providers honour it.
			if name == "web_search" && webSearch != nil {
				return searchCalls(*webSearch, user, user, id), "tool_calls"
			}
			return toolCall(id+"_client", name, `{"input":`+strconv.Quote(user)+`}`), "tool_calls"
		}
		if m := toolRE.FindStringSubmatch(user); m != nil && tools[m[1]] {
			return toolCall(id+"_client", m[1], `{"input":`+strconv.Quote(user)+`}`), "tool_calls"
		}
		if name, params := topicTool(req.Tools, user); name != "" && string(req.ToolChoice) != `"none"` {
			// The user asks about what a client tool is for: call it, as models do.
			return toolCall(id+"_client", name, toolArguments(params, user)), "tool_calls"
		}
		if webSearch != nil && wantsSearch(user) {
			q := user
			if strings.Contains(user, "sim:fresh-query") {
				q = fmt.Sprintf("%s (asked at %d)", user, time.Now().UnixNano()) // never the same twice
			}
			return searchCalls(*webSearch, user, q, id), "tool_calls"
		}
	}
	if len(user) > 120 {
		user = user[:120] + "…"
	}
	return map[string]any{"role": "assistant", "content": fmt.Sprintf("(simulated model) I can answer that without searching: you asked %q.", user)}, "stop"
}

// forcedTool is the tool a request's tool_choice forces ("": none): the function it
// names, or with "required" web_search when offered, else the first tool.
func forcedTool(choice json.RawMessage, tools []chatTool) string {
	if len(choice) == 0 || len(tools) == 0 {
		return ""
	}
	var mode string
	if json.Unmarshal(choice, &mode) == nil {
		switch {
		case mode != "required":
			return ""
		case slices.ContainsFunc(tools, func(t chatTool) bool { return t.Function.Name == "web_search" }):
			return "web_search"
		}
		return tools[0].Function.Name
	}
	var o struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	json.Unmarshal(choice, &o)
	if slices.ContainsFunc(tools, func(t chatTool) bool { return t.Function.Name == o.Function.Name }) {
		return o.Function.Name
	}
	return ""
}

// genericToolWords are the words of tool names that say nothing of their topic.
var genericToolWords = map[string]bool{"get": true, "set": true, "fetch": true, "list": true, "call": true, "tool": true,
	"run": true, "make": true, "create": true, "find": true, "search": true, "lookup": true, "query": true, "current": true}

// topicTool is the client function (not one of the fleet's server tools) whose name
// has a word, of four letters or more and not a generic verb, that the user's text
// has as a word; "" when none does.
func topicTool(tools []chatTool, user string) (string, json.RawMessage) {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(user), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		words[w] = true
	}
	for _, t := range tools {
		name := t.Function.Name
		if name == "web_search" || name == "web_fetch" || t.Type != "" && t.Type != "function" {
			continue
		}
		for _, w := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
			if len(w) >= 4 && !genericToolWords[w] && words[w] {
				return name, t.Function.Parameters
			}
		}
	}
	return "", nil
}

// toolArguments are arguments for a call of a tool with the JSON schema params: each
// required string property holds the user's text ({"input": text} when none is
// required).
func toolArguments(params json.RawMessage, user string) string {
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	json.Unmarshal(params, &schema)
	args := map[string]any{}
	for _, k := range schema.Required {
		switch schema.Properties[k].Type {
		case "integer", "number":
			args[k] = 1
		case "boolean":
			args[k] = true
		default:
			args[k] = user
		}
	}
	if len(args) == 0 {
		args["input"] = user
	}
	return string(mustJSON(args))
}

// clientToolTurn reports whether the script calls a client tool on this turn (a
// forced one, a sim:tool one, or the one the user asks about): a model with its own
// search then calls that tool rather than searching.
func clientToolTurn(req chatRequest, user string) bool {
	if len(req.Messages) == 0 || req.Messages[len(req.Messages)-1].Role != "user" {
		return false
	}
	if name := forcedTool(req.ToolChoice, req.Tools); name != "" && name != "web_search" && !strings.HasPrefix(name, "$") {
		return true
	}
	if m := toolRE.FindStringSubmatch(user); m != nil {
		return true
	}
	name, _ := topicTool(req.Tools, user)
	return name != "" && string(req.ToolChoice) != `"none"`
}

// urlRE finds a URL in the user's text (sim:fetch).
var urlRE = regexp.MustCompile(`https?://[^\s"'<>()\[\]{}]+`)

// fetchCall is a web_fetch call of url.
func fetchCall(url, id string) map[string]any {
	return toolCall(id+"_fetch", "web_fetch", string(mustJSON(map[string]string{"url": url})))
}

// toolCall is an assistant message calling one tool, its call id "call_"+id.
func toolCall(id, name, args string) map[string]any {
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"id": "call_" + id, "type": "function",
		"function": map[string]any{"name": name, "arguments": args},
	}}}
}

// fetched reports whether the model already called web_fetch since the user spoke.
func fetched(msgs []llm.Message) bool {
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role != "user"; i-- {
		for _, tc := range msgs[i].ToolCalls {
			if tc.Function.Name == "web_fetch" {
				return true
			}
		}
	}
	return false
}

func wantsSearch(text string) bool {
	if strings.Contains(text, "sim:nosearch") {
		return false
	}
	lower := strings.ToLower(text)
	return slices.ContainsFunc(searchWords, func(w string) bool { return strings.Contains(lower, w) })
}

// searchCalls builds the web_search call(s) for query.
func searchCalls(params json.RawMessage, user, query, id string) map[string]any {
	n := 1
	if m := callsRE.FindStringSubmatch(user); m != nil {
		n, _ = strconv.Atoi(m[1])
		n = min(max(n, 1), 8)
	}
	engine := requiredEngine(params)
	if m := engineRE.FindStringSubmatch(user); m != nil {
		engine = m[1]
	}
	query = strings.TrimSpace(query)
	if len(query) > 300 {
		query = query[:300]
	}
	calls := make([]any, 0, n)
	for i := range n {
		q := query
		if n > 1 {
			q = fmt.Sprintf("%s (part %d)", query, i+1)
		}
		args := map[string]any{"query": q}
		if engine != "" {
			args["engine"] = engine
		}
		switch {
		case strings.Contains(user, "sim:badkey"):
			args["foo"] = 1
		case strings.Contains(user, "sim:emptyquery"):
			args["query"] = "   "
		}
		argStr := string(mustJSON(args))
		if strings.Contains(user, "sim:badargs") {
			argStr = `{"query": "unterminated`
		}
		calls = append(calls, map[string]any{
			"id": fmt.Sprintf("call_%s_%d", id, i), "type": "function",
			"function": map[string]any{"name": "web_search", "arguments": argStr},
		})
	}
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
}

// requiredEngine returns the first engine of the schema's enum when the schema
// requires the model to choose one, else "".
func requiredEngine(params json.RawMessage) string {
	var p struct {
		Required   []string `json:"required"`
		Properties struct {
			Engine struct {
				Enum []string `json:"enum"`
			} `json:"engine"`
		} `json:"properties"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	if slices.Contains(p.Required, "engine") && len(p.Properties.Engine.Enum) > 0 {
		return p.Properties.Engine.Enum[0]
	}
	return ""
}

// answerFrom writes the final answer from tool results: the first sentences of each
// grounded summary (with their [n] markers), or for raw results each source's title
// and a quote of its snippet (quoteSources), citing the numbered sources it was given,
// so every citation quotes what its source says.
func answerFrom(results []string) string {
	var parts []string
	failed := 0
	for _, r := range results {
		r = stripEvidence(r) // the fleet's delimiters around a result
		if strings.HasPrefix(r, "Error:") {
			failed++
			continue
		}
		body := r
		if i := strings.Index(body, ":\n\n"); i >= 0 && strings.HasPrefix(body, "Web search results for") {
			body = body[i+3:]
		}
		summary := body
		if i := strings.Index(summary, "Sources:\n"); i >= 0 {
			summary = summary[:i]
		}
		if s := firstSentences(strings.TrimSpace(summary), 2); s != "" && sourceMarkerRE.MatchString(s) {
			parts = append(parts, s)
			continue
		}
		if cites := quoteSources(r, 3); len(cites) > 0 {
			parts = append(parts, "The search found: "+strings.Join(cites, "; ")+".")
		}
	}
	switch {
	case len(parts) > 0:
		return "(simulated answer) " + strings.Join(parts[:min(len(parts), maxAnswerParts)], " ")
	case failed > 0:
		return "(simulated answer) The web search failed, so this answer comes from what I already know."
	}
	return "(simulated answer) The search found nothing relevant."
}

// maxAnswerParts is how many results a final answer draws on.
const maxAnswerParts = 4

var sourceMarkerRE = regexp.MustCompile(`\[\d+\]`)

// quoteSources cites up to n sources of a raw result ("[n] Title (url)" lines, each
// followed by its indented snippet): `Title [n]: "first sentence of the snippet"`, or
// the title alone when the source has no snippet.
func quoteSources(result string, n int) []string {
	var cites []string
	for _, m := range sourceLineRE.FindAllStringSubmatchIndex(result, n) {
		title, num := strings.TrimSpace(result[m[4]:m[5]]), result[m[2]:m[3]]
		cite := fmt.Sprintf("%s [%s]", title, num)
		rest := result[m[1]:]
		if line, ok := strings.CutPrefix(rest, "\n    "); ok {
			line, _, _ = strings.Cut(line, "\n")
			if q := firstSentences(line, 1); q != "" {
				cite += fmt.Sprintf(": %q", q)
			}
		}
		cites = append(cites, cite)
	}
	return cites
}

// stripEvidence drops the delimiters the fleet puts around each tool result
// (<search_results id="…"> … </search_results id="…">, see pkg/chat/evidence.go): a
// line that is one, with its line end, in one scan.
func stripEvidence(r string) string {
	if !strings.Contains(r, `search_results id="`) {
		return r
	}
	var b strings.Builder
	b.Grow(len(r))
	for start := 0; start < len(r); {
		line := r[start:]
		if n := delimiterLen(line); n > 0 {
			start += n
			continue
		}
		end := strings.IndexByte(line, '\n')
		if end < 0 {
			b.WriteString(line)
			break
		}
		b.WriteString(line[:end+1])
		start += end + 1
	}
	return b.String()
}

// delimiterLen is the length of the evidence delimiter s begins with
// (`</?search_results id="[0-9a-f]+">` and the line end after it, if any), or 0.
func delimiterLen(s string) int {
	i := 0
	if strings.HasPrefix(s, "</") {
		i = 2
	} else if strings.HasPrefix(s, "<") {
		i = 1
	} else {
		return 0
	}
	const head = `search_results id="`
	if !strings.HasPrefix(s[i:], head) {
		return 0
	}
	i += len(head)
	hex := i
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
		i++
	}
	if i == hex || !strings.HasPrefix(s[i:], `">`) {
		return 0
	}
	i += 2
	if i < len(s) && s[i] == '\n' {
		i++
	}
	return i
}

// firstSentences returns up to n sentences of text, keeping markers that follow a
// sentence's end ("… today. [1][2]" or "… today.[1]").
func firstSentences(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	end := 0
	for count := 0; count < n && end < len(text); {
		i := sentenceEnd(text[end:])
		if i < 0 {
			return text
		}
		end += i
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
		for {
			rest := text[end:]
			m := sourceMarkerRE.FindStringIndex(strings.TrimLeft(rest, " "))
			if m == nil || m[0] != 0 {
				break
			}
			end += len(rest) - len(strings.TrimLeft(rest, " ")) + m[1]
		}
		count++
	}
	return strings.TrimSpace(text[:end])
}

// sentenceEnd is the index of the first sentence end of text: "。！？", or ".!?" followed
// by a space, a marker or the end (so "2.12" and "example.com" end nothing); -1 if none.
func sentenceEnd(text string) int {
	for i, r := range text {
		switch r {
		case '。', '！', '？':
			return i
		case '.', '!', '?':
			if rest := text[i+1:]; rest == "" || rest[0] == ' ' || rest[0] == '[' || rest[0] == '\n' {
				return i
			}
		}
	}
	return -1
}
