package llm

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

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// Client calls one OpenAI-compatible provider.
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
// and rested, or an access token (keys.go).
func NewClientWith(name, baseURL string, creds *Credentials, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{name: name, baseURL: strings.TrimRight(baseURL, "/"), creds: creds, hc: hc}
}

// Completion is the part of a chat completion the fleet uses.
type Completion struct {
	ID    string
	Model string
	// Message is the assistant message exactly as the model sent it: the next hop
	// echoes it back verbatim (providers such as Kimi and DeepSeek need their own
	// fields, e.g. reasoning_content, returned).
	Message      json.RawMessage
	FinishReason string
	Usage        Usage
}

// Usage is token usage of one or more model calls.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Add accumulates u2.
func (u *Usage) Add(u2 Usage) {
	u.PromptTokens += u2.PromptTokens
	u.CompletionTokens += u2.CompletionTokens
	u.TotalTokens += u2.TotalTokens
}

// Error is a failed model call.
type Error struct {
	Provider string
	// Status is the provider's HTTP status (0: no HTTP answer).
	Status int
	// Type and Message come from the provider's OpenAI-shaped error body.
	Type    string
	Code    string
	Message string
	// RetryAfter is the provider's requested wait on 429/503.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model provider %s", e.Provider)
	if e.Status != 0 {
		fmt.Fprintf(&b, " answered HTTP %d", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the same call may succeed later (429, 408, 5xx, network).
func (e *Error) Retryable() bool {
	return e.Status == 0 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout || e.Status >= 500
}

// Complete sends one chat completion request body and returns the first choice. With
// onDelta set the request asks the provider to stream (stream: true, with usage) and
// onDelta receives each piece of answer text as it arrives; the Completion is
// assembled from the chunks exactly as the whole answer would have read (streamRead).
func (c *Client) Complete(ctx context.Context, body []byte, onDelta func(Delta)) (*Completion, error) {
	if onDelta != nil {
		b, err := streamingBody(body)
		if err != nil {
			return nil, &Error{Provider: c.name, Message: "building request", Err: err}
		}
		body = b
	}
	var comp *Completion
	err := c.creds.Try(ctx, onDelta, func(cred Credential, onDelta func(Delta)) (err error) {
		comp, err = c.attempt(ctx, body, cred, onDelta)
		return err
	})
	return comp, err
}

// attempt makes one request with cred.
func (c *Client) attempt(ctx context.Context, body []byte, cred Credential, onDelta func(Delta)) (*Completion, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Provider: c.name, Message: "building request", Err: err}
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
func (c *Client) answer(ctx context.Context, resp *http.Response, err error, onDelta func(Delta)) (*Completion, error) {
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Provider: c.name, Message: c.redact(err.Error()), Err: errors.Unwrap(err)}
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
		return nil, &Error{Provider: c.name, Status: resp.StatusCode, Message: "reading response: " + err.Error()}
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.httpError(resp, data)
	}
	// A provider that ignores stream: true answers whole: the answer is read whole.
	comp, err := c.decodeCompletion(resp.StatusCode, data)
	if err == nil && onDelta != nil {
		if m, perr := ParseMessage(comp.Message); perr == nil {
			if t := Text(m.Content); t != "" {
				onDelta(Delta{Text: t})
			}
		}
	}
	return comp, err
}

// decodeCompletion reads a whole chat.completion body.
func (c *Client) decodeCompletion(status int, data []byte) (*Completion, error) {
	var out struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
		Usage Usage           `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, &Error{Provider: c.name, Status: status, Type: "bad_response", Message: "response is not a chat completion: " + truncate(err.Error(), 200)}
	}
	if e := c.inBandError(out.Error); e != nil {
		return nil, e
	}
	if len(out.Choices) == 0 || len(out.Choices[0].Message) == 0 {
		return nil, &Error{Provider: c.name, Status: status, Type: "bad_response", Message: "chat completion has no choices"}
	}
	return &Completion{ID: out.ID, Model: out.Model, Message: out.Choices[0].Message, FinishReason: out.Choices[0].FinishReason, Usage: out.Usage}, nil
}

// inBandError reads an error object some providers (OpenRouter) send inside a 200, in
// a whole body or in a stream's data event; nil when raw is absent or null.
func (c *Client) inBandError(raw json.RawMessage) *Error {
	e := InBandError(raw)
	if e != nil {
		e.Provider, e.Message = c.name, c.redact(e.Message)
	}
	return e
}

// InBandError reads the error object of a Chat answer or chunk that failed inside a
// 200 (OpenRouter sends them); nil when raw is absent or null. Its Provider is left
// for the caller to set.
func InBandError(raw json.RawMessage) *Error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var e struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	json.Unmarshal(raw, &e)
	status := http.StatusBadGateway
	if code, ok := e.Code.(float64); ok && code >= 400 {
		status = int(code)
	}
	out := &Error{Status: status, Type: "upstream_error", Message: truncate(e.Message, 500)}
	if e.Code != nil {
		out.Code = fmt.Sprint(e.Code)
	}
	if out.Message == "" {
		out.Message = "the provider reported an error"
	}
	return out
}

func (c *Client) httpError(resp *http.Response, data []byte) *Error {
	e := &Error{Provider: c.name, Status: resp.StatusCode}
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error.Message != "" {
		e.Message = c.redact(truncate(body.Error.Message, 500))
		e.Type = body.Error.Type
		if body.Error.Code != nil {
			e.Code = fmt.Sprint(body.Error.Code)
		}
	} else {
		e.Message = c.redact(truncate(strings.TrimSpace(string(data)), 300))
	}
	e.RetryAfter = provider.RetryAfter(resp.Header, data, time.Now())
	return e
}

func (c *Client) redact(s string) string { return c.creds.Redact(s) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ParseMessage reads an assistant message.
func ParseMessage(raw json.RawMessage) (Message, error) {
	var m Message
	err := json.Unmarshal(raw, &m)
	return m, err
}
