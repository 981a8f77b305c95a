package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDecide is the outcome table, one row per case.
func TestDecide(t *testing.T) {
	t.Parallel()
	transient := errors.New("connection reset")
	cases := []struct {
		name       string
		err        error
		attempt    int
		maxDeliver int
		want       Action
		delay      time.Duration
		reason     string
	}{
		{"success acks", nil, 1, 5, Ack, 0, ""},
		{"success on last attempt acks", nil, 5, 5, Ack, 0, ""},
		{"retry naks with its delay", Retry(3*time.Second, transient), 1, 5, Nak, 3 * time.Second, ""},
		{"retry wrapped by %w still naks", fmt.Errorf("search: %w", Retry(time.Second, transient)), 2, 5, Nak, time.Second, ""},
		{"retry on last attempt dead-letters", Retry(time.Second, transient), 5, 5, TermDLQ, 0, "failed all 5 deliveries"},
		{"permanent dead-letters at once", Permanent(transient), 1, 5, TermDLQ, 0, "permanent: connection reset"},
		{"undecodable dead-letters at once", fmt.Errorf("%w: not json", ErrUndecodable), 1, 5, TermDLQ, 0, "undecodable"},
		{"plain error naks with back-off 1", transient, 1, 5, Nak, time.Second, ""},
		{"plain error naks with back-off 3", transient, 3, 5, Nak, 4 * time.Second, ""},
		{"plain error on last attempt dead-letters", transient, 5, 5, TermDLQ, 0, "failed all 5 deliveries"},
		{"unlimited deliveries never dead-letter", transient, 100, 0, Nak, 30 * time.Second, ""},
		{"shutdown naks at once", context.Canceled, 1, 5, Nak, 0, ""},
		{"shutdown on last attempt dead-letters", fmt.Errorf("model: %w", context.Canceled), 5, 5, TermDLQ, 0, "cancelled on the last"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.err, c.attempt, c.maxDeliver)
			if got.Action != c.want || got.Delay != c.delay || !strings.Contains(got.Reason, c.reason) {
				t.Fatalf("Decide = %v %s %q, want %v %s %q", got.Action, got.Delay, got.Reason, c.want, c.delay, c.reason)
			}
		})
	}
}

func TestBackoffCaps(t *testing.T) {
	t.Parallel()
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := Backoff(i + 1); got != w {
			t.Errorf("Backoff(%d) = %s, want %s", i+1, got, w)
		}
	}
}
