package batch

import (
	"fmt"
	"time"
)

// Kind says what a refused request needs: the API answers each with its own status.
type Kind int

// The kinds of Error.
const (
	// Invalid: the client must change the request (400).
	Invalid Kind = iota + 1
	// NotFound: no such batch or file for this tenant (404).
	NotFound
	// Conflict: the batch's state refuses the request (409).
	Conflict
	// Unavailable: the fleet could not do it now; the same request may succeed later
	// (503).
	Unavailable
	// Limited: a per-tenant limit or quota refuses it (429); Limit names which.
	Limited
	// TooLarge: the body or the file is over its size limit (413).
	TooLarge
	// Full: the file store is full (507).
	Full
)

// Error is a request the batch service refused, worded for the client. The cause of
// an Unavailable error is kept (Unwrap) for logs, never shown.
type Error struct {
	Kind Kind
	// Code is the OpenAI error code ("file_not_found"), if any; Param the request
	// parameter at fault, if any.
	Code, Param string
	Message     string
	// Input lists the invalid lines when validation refused the input.
	Input *Validation
	// RetryAfter, when set, is how soon to try again.
	RetryAfter time.Duration
	// Limit is the per-tenant limit that refused a Limited request ("batches",
	// "files", "file_bytes").
	Limit string
	Err   error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// invalid is a 400 of param.
func invalid(code, param, format string, args ...any) *Error {
	return &Error{Kind: Invalid, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// unavailable is a 503 with its cause.
func unavailable(err error, msg string) *Error {
	return &Error{Kind: Unavailable, Message: msg, Err: err}
}
