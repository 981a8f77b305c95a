package bus

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ConsumerLag lets the external tests read one durable consumer's backlog.
func (b *Bus) ConsumerLag(ctx context.Context, stream, consumer string) (Lag, error) {
	c, err := b.js.Consumer(ctx, b.Name(stream), b.Name(consumer))
	if err != nil {
		return Lag{}, fmt.Errorf("consumer %s/%s: %w", b.Name(stream), b.Name(consumer), err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return Lag{}, fmt.Errorf("consumer %s/%s: %w", b.Name(stream), b.Name(consumer), err)
	}
	return Lag{Pending: info.NumPending, AckPending: uint64(info.NumAckPending)}, nil
}

// WithPublishAckTimeout replaces PublishAckTimeout for this connection.
func WithPublishAckTimeout(d time.Duration) Option { return func(b *Bus) { b.ackWait = d } }

// BandOfSubject is the band of a lane subject of any family ("" for any other
// subject).
func BandOfSubject(subject string) string {
	for _, p := range []string{prefixJobLanes, prefixResumeLanes, SubjectResearch} {
		if l, ok := LaneOf(p, subject); ok {
			return l.Band
		}
	}
	if rest, ok := strings.CutPrefix(subject, subjectSearch); ok {
		if _, lane, ok := strings.Cut(rest, "."); ok {
			band, _, _ := strings.Cut(lane, ".")
			return band
		}
	}
	return ""
}

// EngineOfSubject returns the engine id of a fleet.search.v1.<engine>[.<band>.<tenant>]
// subject.
func EngineOfSubject(subject string) string {
	e, _, _ := strings.Cut(strings.TrimPrefix(subject, subjectSearch), ".")
	return e
}
