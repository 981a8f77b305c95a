package openaichat

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Model is OpenAI Chat Completions as the fleet speaks it to a main model (OpenAI
// and every OpenAI-compatible provider): the same upstream.Caller that speaks the
// other protocols calls it. A Chat model's own reasoning goes back as it came, as
// reasoning_content on the assistant message that made the tool calls (DeepSeek and
// Kimi thinking models refuse a tool loop without it); other protocols' reasoning
// state is not for it.
var Model chatModel

type chatModel struct{ wire.OpenAIAPI }

func (chatModel) Protocol() wire.Protocol { return wire.OpenAIChat }

func (chatModel) NativeSearch(string) (string, float64, bool) {
	return string(wire.OpenAIChat), 0, false
}

// TakesFile: a Chat file part carries a PDF's bytes only. Kimi's and GLM's Chat APIs
// take no file: files reach them as text.
func (chatModel) TakesFile(media string) bool { return media == wire.MediaPDF }
func (chatModel) TakesFileURL(string) bool    { return false }

func (chatModel) Path(string, bool) string { return "/chat/completions" }

// EncodeRequest renders r as a Chat request for model: the reasoning settings as
// reasoning_effort, a streamed request asking for the final usage chunk. The
// request's own Chat parameters (Params) go along.
func (chatModel) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	return chatModelRequest(r, Model, model, func(wire.TopLevel) {})
}

// chatModelRequest is ChatModel's request, its files as api (ChatModel, Kimi's or
// GLM's) reads them, with native's changes to its fields (the provider's own search).
func chatModelRequest(r *wire.Request, api wire.ModelAPI, model string, native func(out wire.TopLevel)) ([]byte, error) {
	r, err := wire.ModelFiles(r, api, model)
	if err != nil {
		return nil, err
	}
	out, err := chatRequest(r, model, true)
	if err != nil {
		return nil, err
	}
	if _, named := r.Params["max_completion_tokens"]; named {
		delete(out, "max_tokens") // the client's own name for the limit goes as it came
	}
	if e := r.Reasoning.EffortOf(); e != "" {
		out.Set("reasoning_effort", e)
	}
	delete(out, "stream_options")
	if r.Stream {
		out.Set("stream", true)
		out.Set("stream_options", map[string]bool{"include_usage": true})
	}
	native(out)
	return json.Marshal(out)
}

// chatOwnReasoning is an assistant message's reasoning_content from a Chat model's
// own reasoning among parts (the other protocols' state is not for a Chat model):
// nil when it has none.
func chatOwnReasoning(parts []wire.Part) *string {
	var text []string
	for _, p := range parts {
		if r, ok := wire.ReasoningFor(p, wire.OpenAIChat); ok {
			text = append(text, r.Text)
		}
	}
	if len(text) == 0 {
		return nil
	}
	s := strings.Join(text, "")
	return &s
}

// DecodeResponse reads a chat.completion; an error object inside a 200 (OpenRouter)
// is the *llm.Error it reports.
func (chatModel) DecodeResponse(body []byte) (*wire.Response, error) {
	// An in-band error wins over a completion whose fields have the wrong types
	// (encoding/json reads on past a type mismatch).
	var c chatCompletion
	err := json.Unmarshal(body, &c)
	if le := llm.InBandError(c.Error); le != nil {
		return nil, le
	}
	if err != nil {
		return nil, fmt.Errorf("not a chat completion: %w", err)
	}
	return c.response()
}

func (chatModel) NewStreamDecoder() wire.StreamDecoder { return &chatDecoder{s: llm.NewChatStream()} }

// chatDecoder assembles a streamed chat completion (llm.ChatStream) and decodes it as
// the whole answer it stands for.
type chatDecoder struct{ s *llm.ChatStream }

func (d *chatDecoder) Event(_ string, data []byte) (string, error) { return d.s.Chunk(data) }

func (d *chatDecoder) Response() (*wire.Response, error) {
	body, done := d.s.Body()
	if !done {
		return nil, &llm.Error{Status: http.StatusBadGateway, Type: "stream_broken", Message: "the model's stream ended before its answer did"}
	}
	return Model.DecodeResponse(body)
}
