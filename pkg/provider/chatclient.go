package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Client calls one OpenAI-compatible provider with Chat Completions request bodies.
type Client struct {
	name    string
	baseURL string
	creds   *Credentials // keys never logged, never in an error
	hc      *http.Client
}

// NewClient returns a client for the provider at baseURL (".../v1"), authenticating
// with key (may be empty for local servers).
func NewClient(name, baseURL, key string, hc *http.Client) *Client {
	return NewClientWith(name, baseURL, NewCredentials(name, []string{key}, CredentialOptions{}), hc)
}

// NewClientWith is NewClient with the provider's credentials: several keys rotated
// and rested, or an access token (credentials.go).
func NewClientWith(name, baseURL string, creds *Credentials, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{name: name, baseURL: strings.TrimRight(baseURL, "/"), creds: creds, hc: hc}
}

// Complete sends one chat completion request body and returns the first choice. With
// onDelta set the request asks the provider to stream (stream: true, with usage) and
// onDelta receives each piece of answer text as it arrives; the Completion is
// assembled from the chunks exactly as the whole answer would have read (streamRead).
func (c *Client) Complete(ctx context.Context, body []byte, onDelta func(llm.Delta)) (*llm.Completion, error) {
	if onDelta != nil {
		b, err := streamingBody(body)
		if err != nil {
			return nil, &llm.Error{Provider: c.name, Message: "building request", Err: err}
		}
		body = b
	}
	var comp *llm.Completion
	err := c.creds.Try(ctx, onDelta, func(cred Credential, onDelta func(llm.Delta)) (err error) {
		comp, err = c.attempt(ctx, body, cred, onDelta)
		return err
	})
	return comp, err
}

// attempt makes one request with cred.
func (c *Client) attempt(ctx context.Context, body []byte, cred Credential, onDelta func(llm.Delta)) (*llm.Completion, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, &llm.Error{Provider: c.name, Message: "building request", Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if onDelta != nil {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if cred.Value != "" {
		req.Header.Set("Authorization", "Bearer "+cred.Value)
	}
	resp, err := c.hc.Do(req)
	return c.answer(ctx, resp, err, onDelta)
}

// answer reads the answer to one request: the response, or the error sending it.
func (c *Client) answer(ctx context.Context, resp *http.Response, err error, onDelta func(llm.Delta)) (*llm.Completion, error) {
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &llm.Error{Provider: c.name, Message: c.redact(err.Error()), Err: errors.Unwrap(err)}
	}
	defer resp.Body.Close()
	if onDelta != nil && resp.StatusCode/100 == 2 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return c.readStream(ctx, resp, onDelta)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &llm.Error{Provider: c.name, Status: resp.StatusCode, Message: "reading response: " + err.Error()}
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.httpError(resp, data)
	}
	// A provider that ignores stream: true answers whole: the answer is read whole.
	comp, err := c.decodeCompletion(resp.StatusCode, data)
	if err == nil && onDelta != nil {
		if m, perr := llm.ParseMessage(comp.Message); perr == nil {
			if t := llm.Text(m.Content); t != "" {
				onDelta(llm.Delta{Text: t})
			}
		}
	}
	return comp, err
}

// decodeCompletion reads a whole chat.completion body.
func (c *Client) decodeCompletion(status int, data []byte) (*llm.Completion, error) {
	var out struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
		Usage llm.Usage       `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, &llm.Error{Provider: c.name, Status: status, Type: "bad_response", Message: "response is not a chat completion: " + llm.Truncate(err.Error(), 200)}
	}
	if e := c.inBandError(out.Error); e != nil {
		return nil, e
	}
	if len(out.Choices) == 0 || len(out.Choices[0].Message) == 0 {
		return nil, &llm.Error{Provider: c.name, Status: status, Type: "bad_response", Message: "chat completion has no choices"}
	}
	return &llm.Completion{ID: out.ID, Model: out.Model, Message: out.Choices[0].Message, FinishReason: out.Choices[0].FinishReason, Usage: out.Usage}, nil
}

// inBandError reads an error object some providers (OpenRouter) send inside a 200, in
// a whole body or in a stream's data event; nil when raw is absent or null.
func (c *Client) inBandError(raw json.RawMessage) *llm.Error {
	e := llm.InBandError(raw)
	if e != nil {
		e.Provider, e.Message = c.name, c.redact(e.Message)
	}
	return e
}

func (c *Client) httpError(resp *http.Response, data []byte) *llm.Error {
	e := &llm.Error{Provider: c.name, Status: resp.StatusCode}
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error.Message != "" {
		e.Message = c.redact(llm.Truncate(body.Error.Message, 500))
		e.Type = body.Error.Type
		if body.Error.Code != nil {
			e.Code = fmt.Sprint(body.Error.Code)
		}
	} else {
		e.Message = c.redact(llm.Truncate(strings.TrimSpace(string(data)), 300))
	}
	e.RetryAfter = RetryAfter(resp.Header, data, time.Now())
	return e
}

func (c *Client) redact(s string) string { return c.creds.Redact(s) }

// readStream reads a chat completion's server-sent chunks, calling onDelta with each
// piece of text, and returns the assembled completion. In-band errors and a stream
// cut short are *llm.Error values (status 0 for a cut: retryable).
func (c *Client) readStream(ctx context.Context, resp *http.Response, onDelta func(llm.Delta)) (*llm.Completion, error) {
	s := llm.NewChatStream()
	var failed *llm.Error
	err := llm.ReadSSE(resp.Body, func(_ string, data []byte) error {
		text, err := s.Chunk(data)
		if errors.As(err, &failed) {
			failed.Provider, failed.Message = c.name, c.redact(failed.Message)
			if failed.Status == 0 {
				failed.Status = resp.StatusCode
			}
			return failed
		}
		if err != nil {
			return err
		}
		if text != "" {
			onDelta(llm.Delta{Text: text})
		}
		return nil
	})
	switch {
	case failed != nil:
		return nil, failed
	case err != nil && !errors.Is(err, llm.ErrStreamDone):
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &llm.Error{Provider: c.name, Message: "reading the stream: " + c.redact(err.Error()), Err: llm.ErrStreamCut}
	case !s.Done():
		return nil, &llm.Error{Provider: c.name, Message: llm.ErrStreamCut.Error(), Err: llm.ErrStreamCut}
	}
	return s.Completion(), nil
}

// streamingBody returns a chat request body with streaming on and the final usage
// chunk asked for (stream_options.include_usage), whatever the body said.
func streamingBody(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errors.New("request body is not a JSON object")
	}
	top["stream"] = json.RawMessage("true")
	top["stream_options"] = json.RawMessage(`{"include_usage":true}`)
	return json.Marshal(top)
}

var _ llm.Caller = (*Client)(nil)
