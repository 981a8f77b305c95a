package bus

import (
	"errors"
	"testing"
	"time"
)

func TestRetryOrEnd(t *testing.T) {
	t.Parallel()
	cause := errors.New("upstream 503")
	ended := errors.New("ended")
	for _, c := range []struct {
		retryable, last bool
		wantEnd         bool
	}{
		{true, false, false},
		{true, true, true},
		{false, false, true},
		{false, true, true},
	} {
		err := RetryOrEnd(cause, c.retryable, c.last, 2*time.Second, func() error { return ended })
		if got := errors.Is(err, ended); got != c.wantEnd {
			t.Errorf("retryable=%v last=%v: ended=%v, want %v (err %v)", c.retryable, c.last, got, c.wantEnd, err)
		}
		if !c.wantEnd {
			if d := Decide(err, 1, 5); d.Action != Nak || d.Delay != 2*time.Second || !errors.Is(err, cause) {
				t.Errorf("retry decided %+v (err %v)", d, err)
			}
		}
	}
}

func TestLeaseHeld(t *testing.T) {
	t.Parallel()
	err := LeaseHeld(time.Second, errors.New("held"))
	if d := Decide(err, 1, 5); d.Action != Nak || d.Delay != time.Second+LeaseMargin {
		t.Fatalf("decided %+v", d)
	}
}
