package bus

import (
	"time"
)

// LeaseMargin is how long after another holder's lease would lapse a step looks again.
const LeaseMargin = 100 * time.Millisecond

// LeaseHeld is the outcome of a step whose lease another worker holds (or held when
// it died): look again once that lease, with left to run, would have lapsed. Chat
// hops, searches and batch drivers share it.
func LeaseHeld(left time.Duration, err error) error {
	return Retry(left+LeaseMargin, err)
}

// RetryOrEnd is the rule for a failure that may pass (a rate limit, a timeout, a 5xx).
// While deliveries remain (last is false) a retryable failure is retried after
// after; otherwise end runs, and must make the failure visible — a failed job, an
// error result the model reads — because retrying the last delivery would only
// dead-letter the message.
func RetryOrEnd(err error, retryable, last bool, after time.Duration, end func() error) error {
	if retryable && !last {
		return Retry(after, err)
	}
	return end()
}
