package state

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// The Store is the fleet's engines.Cooldowns: a resting key is a Redis key with a TTL
// (Keys.KeyCooldown), so a key one worker saw refused rests for all of them.
var _ engines.Cooldowns = (*Store)(nil)

// coolDown rests a key: KEYS[1] the key's cooldown; ARGV[1] reason; ARGV[2] ms. A
// longer rest already running is kept. Returns 1 when the key was usable before.
var coolDown = redis.NewScript(`
local left = redis.call('PTTL', KEYS[1])
if left >= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if left > 0 then return 0 end
return 1
`)

// CoolDown rests the key fp of engine for d because of reason, never shortening a
// longer rest; it reports whether the key was usable before (exactly one of several
// concurrent callers sees true).
func (s *Store) CoolDown(ctx context.Context, engine, fp string, reason engines.ErrorKind, d time.Duration) (bool, error) {
	ms := max(d.Milliseconds(), 1)
	n, err := coolDown.Run(ctx, s.r, []string{s.K.KeyCooldown(engine, fp)}, string(reason), ms).Int()
	if err != nil {
		return false, fmt.Errorf("state: key cooldown: %w", err)
	}
	return n == 1, nil
}

// Resting returns how long each of engine's keys fps still rests, and why, in one
// round trip.
func (s *Store) Resting(ctx context.Context, engine string, fps []string) ([]engines.Rest, error) {
	ttls := make([]*redis.DurationCmd, len(fps))
	vals := make([]*redis.StringCmd, len(fps))
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, fp := range fps {
			k := s.K.KeyCooldown(engine, fp)
			vals[i], ttls[i] = p.Get(ctx, k), p.PTTL(ctx, k)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("state: key cooldowns: %w", err)
	}
	out := make([]engines.Rest, len(fps))
	for i := range fps {
		if left := ttls[i].Val(); left > 0 {
			out[i] = engines.Rest{Left: left, Reason: engines.ErrorKind(vals[i].Val())}
		}
	}
	return out, nil
}
