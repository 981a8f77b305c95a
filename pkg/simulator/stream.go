package simulator

import (
	"encoding/json"
	"net/http"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Streaming. With "stream": true the scripted model sends the answer it would have
// sent whole as OpenAI chat completion chunks over server-sent events, the way the
// real API does (a recorded gpt-4.1-nano tool-call stream, and the OpenRouter
// recordings in the shared fixtures):
//
//	data: {…"object":"chat.completion.chunk",…"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}
//	data: {…"delta":{"content":" answer"}…}                                  one per token
//	data: {…"delta":{"tool_calls":[{"index":0,"id":"call_…","type":"function","function":{"name":"web_search","arguments":""}}]}…}
//	data: {…"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"query"}}]}…}   argument fragments
//	data: {…"delta":{},"logprobs":null,"finish_reason":"stop"}]}
//	data: {…"choices":[],"usage":{…}}                                         only with stream_options.include_usage
//	data: [DONE]
//
// Every chunk has the id, created, model and system_fingerprint of the whole answer;
// with include_usage every chunk but the last has "usage":null. A tool-call answer's
// first chunk has "content":null. The directive "sim:token-delay=DUR" in the user's
// text waits DUR between chunks, so tests and benchmarks can watch the answer arrive
// piece by piece; without it the chunks go out back to back (each one flushed).

var tokenDelayRE = regexp.MustCompile(`sim:token-delay=([0-9.]+(?:ms|s))`)

// tokenDelay returns the delay a "sim:token-delay=DUR" directive asks for, or 0.
func tokenDelay(user string) time.Duration {
	m := tokenDelayRE.FindStringSubmatch(user)
	if m == nil {
		return 0
	}
	d, _ := time.ParseDuration(m[1])
	return d
}

// chunkHeader is what every chunk of one answer repeats.
type chunkHeader struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
}

type chunk struct {
	chunkHeader
	Choices []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the request asked for usage,
	// and absent otherwise.
	Usage any `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        map[string]any  `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function functionDelta `json:"function"`
}

type functionDelta struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// streamAnswer writes msg (as script built it) and finish as a chunk stream, ending
// with the usage chunk when includeUsage. It stops early when the client goes away.
func streamAnswer(w http.ResponseWriter, r *http.Request, h chunkHeader, msg map[string]any, finish string, usage map[string]int, includeUsage bool, delay time.Duration) {
	null := json.RawMessage("null")
	var evs []wire.Event
	send := func(c chunk) {
		if includeUsage && c.Usage == nil {
			c.Usage = null
		}
		evs = append(evs, wire.Event{Data: mustJSON(c)})
	}
	delta := func(d map[string]any) {
		send(chunk{chunkHeader: h, Choices: []chunkChoice{{Delta: d, Logprobs: null}}})
	}

	content, hasContent := msg["content"].(string)
	first := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if hasContent {
		first["content"] = ""
	}
	delta(first)
	// A reasoning model (DeepSeek, Kimi) streams its reasoning_content before the
	// answer, a piece at a time, as it streams the content.
	reasoning, _ := msg["reasoning_content"].(string)
	for _, tok := range tokens(reasoning) {
		delta(map[string]any{"reasoning_content": tok})
	}
	for _, tok := range tokens(content) {
		delta(map[string]any{"content": tok})
	}
	calls, _ := msg["tool_calls"].([]any)
	for i, c := range calls {
		call, _ := c.(map[string]any)
		fn, _ := call["function"].(map[string]any)
		id, _ := call["id"].(string)
		typ, _ := call["type"].(string)
		name, _ := fn["name"].(string)
		args, _ := fn["arguments"].(string)
		empty := ""
		delta(map[string]any{"tool_calls": []toolCallDelta{{Index: i, ID: id, Type: typ, Function: functionDelta{Name: name, Arguments: &empty}}}})
		for _, frag := range tokens(args) {
			delta(map[string]any{"tool_calls": []toolCallDelta{{Index: i, Function: functionDelta{Arguments: &frag}}}})
		}
	}
	send(chunk{chunkHeader: h, Choices: []chunkChoice{{Delta: map[string]any{}, Logprobs: null, FinishReason: &finish}}})
	if includeUsage {
		send(chunk{chunkHeader: h, Choices: []chunkChoice{}, Usage: usage})
	}
	writeChunks(w, r, evs, delay)
}

// writeChunks sends chat completion chunks as writeEvents does, and the closing
// "data: [DONE]" right after the last one.
func writeChunks(w http.ResponseWriter, r *http.Request, evs []wire.Event, delay time.Duration) {
	if writeEvents(w, r, evs, delay) {
		w.Write([]byte("data: [DONE]\n\n"))
		http.NewResponseController(w).Flush()
	}
}

// tokens splits s into word-ish pieces whose concatenation is s: white space joins
// the piece that follows it (" answer"), a run of ASCII letters and digits is one
// piece, and every other character (punctuation, each Chinese character) is a piece
// of its own. Invalid UTF-8 bytes are pieces of one byte, so JSON encoding replaces
// them exactly as it does in the whole string.
func tokens(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isSpaceByte(s[j]) {
			j++
		}
		if j == len(s) {
			break // trailing white space joins the last piece
		}
		if isWordByte(s[j]) {
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
		} else {
			_, size := utf8.DecodeRuneInString(s[j:])
			j += size
		}
		out = append(out, s[start:j])
		start, i = j, j
	}
	if start < len(s) {
		if len(out) == 0 {
			return []string{s}
		}
		out[len(out)-1] += s[start:]
	}
	return out
}

func isSpaceByte(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func isWordByte(b byte) bool {
	return b-'0' < 10 || (b|0x20)-'a' < 26
}
