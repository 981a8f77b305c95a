package wire

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/internal/jsonfast"
	"github.com/searchfleet/searchfleet/pkg/llm"
)

// ChatModel is OpenAI Chat Completions as the fleet speaks it to a main model (OpenAI
// and every OpenAI-compatible provider): the same upstream.Caller that speaks the
// other protocols calls it. A Chat model's own reasoning goes back as it came, as
// reasoning_content on the assistant message that made the tool calls (DeepSeek and
// Kimi thinking models refuse a tool loop without it); other protocols' reasoning
// state is not for it.
var ChatModel chatModel

type chatModel struct{}

func (chatModel) Protocol() Protocol { return OpenAIChat }

func (chatModel) NativeSearch(string) (string, float64, bool) { return string(OpenAIChat), 0, false }

// TakesFile: a Chat file part carries a PDF's bytes only. Kimi's and GLM's Chat APIs
// take no file: files reach them as text.
func (chatModel) TakesFile(media string) bool { return media == mediaPDF }
func (chatModel) TakesFileURL(string) bool    { return false }

func (chatModel) Path(string, bool) string { return "/chat/completions" }

// Authorize sets the bearer key (none for a local server without one).
func (chatModel) Authorize(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// EncodeRequest renders r as a Chat request for model: the reasoning settings as
// reasoning_effort, a streamed request asking for the final usage chunk. The
// request's own Chat parameters (Params) go along.
func (chatModel) EncodeRequest(r *Request, model string) ([]byte, error) {
	out, err := chatModelFields(r, ChatModel, model)
	if err != nil {
		return nil, err
	}
	return out.marshal()
}

// chatModelFields are the fields of ChatModel's request, its files as api
// (ChatModel, Kimi's or GLM's) reads them.
func chatModelFields(r *Request, api ModelAPI, model string) (*topLevel, error) {
	r, err := ModelFiles(r, api, model)
	if err != nil {
		return nil, err
	}
	out, err := chatRequest(r, model, true)
	if err != nil {
		return nil, err
	}
	if _, named := r.Params["max_completion_tokens"]; named {
		out.del("max_tokens") // the client's own name for the limit goes as it came
	}
	if e := r.Reasoning.EffortOf(); e != "" {
		out.set("reasoning_effort", e)
	}
	out.del("stream_options")
	if r.Stream {
		out.set("stream", true)
		out.set("stream_options", chatStreamOptions{IncludeUsage: true})
	}
	return out, nil
}

// chatStreamOptions is a streamed request's stream_options.
type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatOwnReasoning is an assistant message's reasoning_content from a Chat model's
// own reasoning among parts (the other protocols' state is not for a Chat model):
// nil when it has none.
func chatOwnReasoning(parts []Part) *string {
	var text []string
	for _, p := range parts {
		if r, ok := reasoningFor(p, OpenAIChat); ok {
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
func (chatModel) DecodeResponse(body []byte) (*Response, error) {
	// One pass reads the completion and an in-band error envelope both. A body that
	// is not JSON fills neither; one whose fields have the wrong types still fills
	// error (jsonfast, like encoding/json, reads on past a type mismatch), which wins as
	// it did when the envelope was read on its own.
	var c chatCompletion
	err := jsonfast.Unmarshal(body, &c)
	if le := llm.InBandError(c.Error); le != nil {
		return nil, le
	}
	if err != nil {
		return nil, fmt.Errorf("not a chat completion: %w", err)
	}
	return c.response()
}

// DecodeError reads the OpenAI error envelope.
func (chatModel) DecodeError(status int, body []byte) *llm.Error {
	return openAIModelError(status, body)
}

func (chatModel) NewStreamDecoder() StreamDecoder { return &chatDecoder{s: llm.NewChatStream()} }

// chatDecoder assembles a streamed chat completion (llm.ChatStream) and decodes it as
// the whole answer it stands for.
type chatDecoder struct{ s *llm.ChatStream }

func (d *chatDecoder) Event(_ string, data []byte) (string, error) { return d.s.Chunk(data) }

func (d *chatDecoder) Response() (*Response, error) {
	body, done := d.s.Body()
	if !done {
		return nil, &llm.Error{Status: http.StatusBadGateway, Type: "stream_broken", Message: "the model's stream ended before its answer did"}
	}
	return ChatModel.DecodeResponse(body)
}
