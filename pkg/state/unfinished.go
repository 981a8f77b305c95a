package state

import (
	"context"
	"time"
)

// Unfinished reports how many jobs have not ended and the earliest deadline among
// them (zero when none): the reaper's deadline set, read for the queue metrics. A job
// leaves the set when the finisher reads it from its terminal event (ReadEnded), so
// the count includes the ended jobs the finisher has yet to handle.
func (s *Jobs) Unfinished(ctx context.Context) (n int64, next time.Time, err error) {
	p := s.r.Pipeline()
	card := p.ZCard(ctx, s.K.Deadlines())
	first := p.ZRangeWithScores(ctx, s.K.Deadlines(), 0, 0)
	if _, err := p.Exec(ctx); err != nil {
		return 0, time.Time{}, err
	}
	if z := first.Val(); len(z) > 0 {
		next = time.UnixMilli(int64(z[0].Score))
	}
	return card.Val(), next, nil
}
