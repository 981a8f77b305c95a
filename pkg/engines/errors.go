package engines

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// ErrorKind classifies an engine failure by what the caller should do about it: the
// provider layer's kinds (provider.Kind), shared with the main-model callers.
type ErrorKind = provider.Kind

// The error kinds. Only RateLimited and Unavailable are worth retrying.
const (
	RateLimited = provider.RateLimited // the provider asked us to slow down; retry after RetryAfter
	Unavailable = provider.Unavailable // a 5xx, a timeout or a network failure; retry with back-off
	BadRequest  = provider.BadRequest  // the provider rejected the request (4xx, in-band invalid input)
	Auth        = provider.Auth        // missing, invalid or unauthorized credentials
	Quota       = provider.Quota       // the account is out of money or over a hard usage limit
	Decode      = provider.Decode      // the provider answered 2xx with a body we could not read
	Canceled    = provider.Canceled    // the caller's context ended first
)

// Error is an engine failure. Its message never contains an API key.
type Error struct {
	Kind   ErrorKind
	Engine string
	// Status is the provider's HTTP status, 0 when the failure was not an HTTP answer.
	Status int
	// RetryAfter is how long the provider asked us to wait (RateLimited), 0 if unsaid.
	RetryAfter time.Duration
	// Message is the provider's own error text, redacted and shortened.
	Message string
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string { return e.render(true) }

// Public is the error as the main model and the client see it: the engine, the kind,
// the provider's status and its own (redacted) message, never the transport's error,
// which names addresses. Error, with those details, is for the log.
func (e *Error) Public() string { return e.render(false) }

// render writes the error; with transport set, the underlying error too.
func (e *Error) render(transport bool) string {
	var b strings.Builder
	b.WriteString(e.Engine)
	b.WriteString(": ")
	b.WriteString(string(e.Kind))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	switch {
	case e.Message != "":
		b.WriteString(": ")
		b.WriteString(e.Message)
		if transport && e.Err != nil {
			fmt.Fprintf(&b, " (%s)", e.Err)
		}
	case transport && e.Err != nil:
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether trying the same search again later can succeed.
func (e *Error) Retryable() bool { return e.Kind.Retryable() }

// errorTypes are the WebSearchResult error types by kind.
var errorTypes = map[ErrorKind]string{RateLimited: "SEARCH_RATE_LIMITED", Unavailable: "SEARCH_UNAVAILABLE", BadRequest: "SEARCH_BAD_REQUEST",
	Auth: "SEARCH_AUTH_FAILED", Quota: "SEARCH_QUOTA_EXCEEDED", Decode: "SEARCH_BAD_RESPONSE", Canceled: "SEARCH_CANCELED"}

// Type is the WebSearchResult error type the main model sees for this failure.
func (e *Error) Type() string { return cmp.Or(errorTypes[e.Kind], "SEARCH_FAILED") }

// AsError returns err as an *Error, wrapping errors that are not one: context errors
// become Canceled (or Unavailable for a deadline, which a retry may beat), anything
// else Unavailable.
func AsError(engine string, err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Kind: Canceled, Engine: engine, Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: Unavailable, Engine: engine, Message: "timed out", Err: err}
	}
	return &Error{Kind: Unavailable, Engine: engine, Err: err}
}
