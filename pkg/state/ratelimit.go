package state

import (
	"context"
	"fmt"
	"time"
)

// gcra takes one request from a limiter shared by every worker (the generic cell rate
// algorithm: the key holds the theoretical arrival time). (lua/rate_limit.lua)
var gcra = script("rate_limit")

// Allow takes one request from engine's limit of perSecond requests with the given
// burst. It returns 0 when the request may go, else how long to wait: the search
// worker re-queues the search with that delay instead of sleeping on a slot.
func (s *Searches) Allow(ctx context.Context, engine string, perSecond float64, burst int) (time.Duration, error) {
	return s.allow(ctx, s.K.rateLimit(engine), perSecond, burst)
}

// allow takes one request from the GCRA limiter at key.
func (s *core) allow(ctx context.Context, key string, perSecond float64, burst int) (time.Duration, error) {
	if perSecond <= 0 {
		return 0, nil
	}
	if burst < 1 {
		burst = 1
	}
	emission := 1000 / perSecond
	v, err := gcra.Run(ctx, s.r, []string{key}, emission, burst).Int64()
	if err != nil {
		return 0, fmt.Errorf("state: rate limit: %w", err)
	}
	return time.Duration(v) * time.Millisecond, nil
}
