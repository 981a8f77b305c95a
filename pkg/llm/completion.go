package llm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
)

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

// ParseCompletion reads a whole chat.completion body: its first choice, or the
// provider's in-band error (InBandError), or a bad_response error when the body is
// not a chat completion or has no choice.
func ParseCompletion(body []byte) (*Completion, error) {
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
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, &Error{Status: http.StatusOK, Type: "bad_response", Message: "response is not a chat completion: " + redact.Truncate(err.Error(), 200)}
	}
	if e := InBandError(out.Error); e != nil {
		return nil, e
	}
	if len(out.Choices) == 0 || len(out.Choices[0].Message) == 0 {
		return nil, &Error{Status: http.StatusOK, Type: "bad_response", Message: "chat completion has no choices"}
	}
	return &Completion{ID: out.ID, Model: out.Model, Message: out.Choices[0].Message, FinishReason: out.Choices[0].FinishReason, Usage: out.Usage}, nil
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
	out := &Error{Status: status, Type: "upstream_error", Message: cmp.Or(redact.Truncate(e.Message, 500), "the provider reported an error")}
	if e.Code != nil {
		out.Code = fmt.Sprint(e.Code)
	}
	return out
}
