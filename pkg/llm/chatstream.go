package llm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// chatChunk is one chat.completion.chunk (or an in-band error event).
type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int                        `json:"index"`
		Delta        map[string]json.RawMessage `json:"delta"`
		FinishReason *string                    `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// toolCallDelta is a fragment of a streamed tool call: the first fragment of a call
// carries its id, type and name, the following ones pieces of its arguments.
type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatStream folds a streamed chat completion's chunks back into the answer a whole
// one is, for the Chat model codec (pkg/llm/openaichat).
type ChatStream struct {
	id, model  string
	content    []byte
	hasContent bool // a non-null content was seen (a tool-call answer's stays null)
	calls      []ToolCall
	callAt     map[int]int // a fragment's index → its place in calls
	extra      map[string]json.RawMessage
	extraText  map[string][]byte // string fields other than content: concatenated
	finish     string
	usage      Usage
	done       bool // [DONE] or a finish_reason was seen
}

// NewChatStream returns the assembler of one streamed chat completion.
func NewChatStream() *ChatStream {
	return &ChatStream{callAt: map[int]int{}, extra: map[string]json.RawMessage{}, extraText: map[string][]byte{}}
}

// Chunk folds in one data event and returns the answer text it adds. [DONE] ends the
// stream (ErrStreamDone); an in-band error is an *Error (Provider unset), a chunk that is not
// one an *Error of type bad_response.
func (s *ChatStream) Chunk(data []byte) (string, error) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		s.done = true
		return "", ErrStreamDone
	}
	var ch chatChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return "", &Error{Type: "bad_response", Message: "stream event is not a chat completion chunk: " + redact.Truncate(err.Error(), 200)}
	}
	if e := InBandError(ch.Error); e != nil {
		return "", e
	}
	return s.add(&ch), nil
}

// Body returns the assembled answer as the body of a whole chat.completion; false when
// the stream has not ended (no finish_reason, no [DONE]).
func (s *ChatStream) Body() ([]byte, bool) {
	b, _ := json.Marshal(map[string]any{"id": s.id, "model": s.model, "usage": s.usage,
		"choices": []any{map[string]any{"index": 0, "message": s.message(), "finish_reason": s.finish}}})
	return b, s.done
}

// ErrStreamDone is what Chunk returns for [DONE]: it stops reading the stream.
var ErrStreamDone = errors.New("done")

// add folds one chunk in and returns its text.
func (a *ChatStream) add(ch *chatChunk) string {
	a.id = cmp.Or(a.id, ch.ID)
	a.model = cmp.Or(a.model, ch.Model)
	if ch.Usage != nil {
		a.usage = *ch.Usage
	}
	var text []byte
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue
		}
		if choice.FinishReason != nil && *choice.FinishReason != "" {
			a.finish, a.done = *choice.FinishReason, true
		}
		for k, v := range choice.Delta {
			if isNull(v) {
				continue
			}
			switch k {
			case "role":
			case "content":
				var s string
				if json.Unmarshal(v, &s) == nil {
					a.hasContent = true
					a.content = append(a.content, s...)
					text = append(text, s...)
				}
			case "tool_calls":
				var frags []toolCallDelta
				json.Unmarshal(v, &frags)
				for _, f := range frags {
					a.addCall(f)
				}
			default:
				a.addExtra(k, v)
			}
		}
	}
	return string(text)
}

func (a *ChatStream) addCall(f toolCallDelta) {
	i, ok := a.callAt[f.Index]
	if !ok {
		i = len(a.calls)
		a.callAt[f.Index] = i
		a.calls = append(a.calls, ToolCall{Type: "function"})
	}
	tc := &a.calls[i]
	tc.ID = cmp.Or(f.ID, tc.ID)
	tc.Type = cmp.Or(f.Type, tc.Type)
	if f.Function.Name != "" && tc.Function.Name == "" {
		tc.Function.Name = f.Function.Name
	}
	tc.Function.Arguments += f.Function.Arguments
}

// addExtra keeps a provider's own message field: strings (reasoning_content) are
// concatenated, arrays (annotations) appended, anything else the last value wins.
func (a *ChatStream) addExtra(k string, v json.RawMessage) {
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			a.extraText[k] = append(a.extraText[k], s...)
			return
		}
	case '[':
		var items, have []json.RawMessage
		if json.Unmarshal(v, &items) == nil {
			json.Unmarshal(a.extra[k], &have)
			b, _ := json.Marshal(append(have, items...))
			a.extra[k] = b
			return
		}
	}
	a.extra[k] = append(json.RawMessage(nil), v...)
}

// message is the assembled answer's message, as a whole answer carries it.
func (a *ChatStream) message() json.RawMessage {
	msg := map[string]any{"role": "assistant", "content": nil}
	if a.hasContent {
		msg["content"] = string(a.content)
	}
	if len(a.calls) > 0 {
		calls := make([]ToolCall, 0, len(a.callAt))
		for _, i := range slices.Sorted(maps.Keys(a.callAt)) { // the order a whole answer lists them in
			calls = append(calls, a.calls[a.callAt[i]])
		}
		msg["tool_calls"] = calls
	}
	for k, v := range a.extra {
		msg[k] = v
	}
	for k, v := range a.extraText {
		msg[k] = string(v)
	}
	b, _ := json.Marshal(msg)
	return b
}
