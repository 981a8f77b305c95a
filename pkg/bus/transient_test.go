package bus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("consumer: %w", nats.ErrTimeout), true},
		{nats.ErrNoResponders, true},
		{&jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, Description: "consumer name in subject does not match durable name in request"}, false},
		{errors.New("invalid configuration"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A request that times out is made again until it succeeds; one the server refuses
// for good is not.
func TestRetryTransient(t *testing.T) {
	calls := 0
	err := retryTransient(context.Background(), func(context.Context) error {
		if calls++; calls < 3 {
			return nats.ErrTimeout
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("got %v after %d calls, want success after 3", err, calls)
	}
	calls = 0
	bad := &jetstream.APIError{Code: 400, Description: "bad config"}
	err = retryTransient(context.Background(), func(context.Context) error { calls++; return bad })
	if !errors.Is(err, bad) || calls != 1 {
		t.Fatalf("got %v after %d calls, want the refusal after 1", err, calls)
	}
}
