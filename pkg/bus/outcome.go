package bus

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A handler's returned error decides what happens to its message:
//
//	nil                     ack: done
//	Retry(d, err)           nak with delay d (rate limits: the provider's retry-after)
//	Permanent(err)          term, and the message goes to the DLQ with err as reason
//	ErrUndecodable (wrapped) term + DLQ at once, never retried
//	context.Canceled        nak at once: the worker is shutting down, another takes it
//	any other error         nak with back-off by attempt (transient failure)
//
// and, on the last allowed delivery, any outcome that would retry becomes term + DLQ
// instead, so an exhausted message is never silently dropped by the server. While a
// handler runs, its message is kept alive with in-progress heartbeats. Decide is that
// table; every row has a test.

// Action is what the consumer does with a message.
type Action int

// The actions.
const (
	Ack        Action = iota // done
	Nak                      // redeliver after Delay
	TermDLQ                  // term + publish to the DLQ with Reason
	InProgress               // still working: reset the ack timer
)

func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Nak:
		return "nak"
	case TermDLQ:
		return "term+dlq"
	case InProgress:
		return "in-progress"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is an action with its delay (Nak) or reason (TermDLQ).
type Decision struct {
	Action Action
	Delay  time.Duration
	Reason string
}

type retryError struct {
	after    time.Duration
	err      error
	deferred bool // held back, not tried: not logged as a failure
}

func (e *retryError) Error() string { return fmt.Sprintf("retry after %s: %v", e.after, e.err) }
func (e *retryError) Unwrap() error { return e.err }

// Retry asks for the message to be redelivered after d.
func Retry(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryError{after: d, err: err}
}

// Defer asks for the message to be redelivered after d without having been worked on
// (a handler holding it back for fairness): Retry, not logged as a failure.
func Defer(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("deferred")
	}
	return &retryError{after: d, err: err, deferred: true}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks a failure no retry can fix: the message is dead-lettered.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err: err}
}

// Backoff is the nak delay for a transient failure on the given attempt (1-based):
// 1s, 2s, 4s, … capped at 30s.
func Backoff(attempt int) time.Duration {
	d := time.Second << min(max(attempt-1, 0), 5)
	return min(d, 30*time.Second)
}

// Decide maps a handler's outcome on delivery attempt (1-based) of maxDeliver to an
// action. maxDeliver ≤ 0 means unlimited.
func Decide(err error, attempt, maxDeliver int) Decision {
	if err == nil {
		return Decision{Action: Ack}
	}
	last := maxDeliver > 0 && attempt >= maxDeliver
	var perm *permanentError
	var retry *retryError
	switch {
	case errors.Is(err, ErrUndecodable):
		return Decision{Action: TermDLQ, Reason: err.Error()}
	case errors.As(err, &perm):
		return Decision{Action: TermDLQ, Reason: err.Error()}
	case errors.Is(err, context.Canceled):
		// Shutdown, not a failure of the message; the attempt still counts, so the
		// last one dead-letters rather than vanishing.
		if last {
			return Decision{Action: TermDLQ, Reason: fmt.Sprintf("cancelled on the last of %d deliveries: %v", maxDeliver, err)}
		}
		return Decision{Action: Nak}
	case last:
		return Decision{Action: TermDLQ, Reason: fmt.Sprintf("failed all %d deliveries: %v", maxDeliver, err)}
	case errors.As(err, &retry):
		return Decision{Action: Nak, Delay: retry.after}
	default:
		return Decision{Action: Nak, Delay: Backoff(attempt)}
	}
}
