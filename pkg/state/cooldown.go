package state

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// Key cooldowns. A resting key is a Redis key with a TTL whose value is why it rests,
// so a key one worker saw refused rests for all of them. Both families are the
// provider layer's one provider.Cooldowns: the Store is the engines' (Keys.KeyCooldown,
// per engine), ModelKeyCooldowns the main models' (Keys.ModelKeyCooldown, per
// provider); both run the same two operations below.
var (
	_ provider.Cooldowns = (*Searches)(nil)
	_ provider.Cooldowns = ModelKeyCooldowns{}
)

// coolDown rests a key; a longer rest already running is kept. (lua/cool_down.lua)
var coolDown = script("cool_down")

// CoolDown rests the key fp of engine for d because of reason, never shortening a
// longer rest; it reports whether the key was usable before (exactly one of several
// concurrent callers sees true).
func (s *Searches) CoolDown(ctx context.Context, engine, fp string, reason provider.Kind, d time.Duration) (bool, error) {
	return s.coolDownKey(ctx, s.K.keyCooldown(engine, fp), string(reason), d)
}

// Resting returns how long each of engine's keys fps still rests, and why, in one
// round trip.
func (s *Searches) Resting(ctx context.Context, engine string, fps []string) ([]provider.Rest, error) {
	return s.resting(ctx, fps, func(fp string) string { return s.K.keyCooldown(engine, fp) })
}

// ModelKeyCooldowns are the main-model providers' key cooldowns (provider.Cooldowns,
// scoped by provider name), kept apart from the engines' so that an engine and a
// provider of one name never share a rest.
type ModelKeyCooldowns struct{ s *core }

// ModelKeyCooldowns returns the main models' key cooldowns in this store.
func (s *Searches) ModelKeyCooldowns() ModelKeyCooldowns { return ModelKeyCooldowns{s: s.core} }

// CoolDown rests the key fp of provider for d (see Store.CoolDown).
func (m ModelKeyCooldowns) CoolDown(ctx context.Context, provider, fp string, reason provider.Kind, d time.Duration) (bool, error) {
	return m.s.coolDownKey(ctx, m.s.K.modelKeyCooldown(provider, fp), string(reason), d)
}

// Resting returns how long each of provider's keys fps still rests (see
// Store.Resting).
func (m ModelKeyCooldowns) Resting(ctx context.Context, provider string, fps []string) ([]provider.Rest, error) {
	return m.s.resting(ctx, fps, func(fp string) string { return m.s.K.modelKeyCooldown(provider, fp) })
}

// coolDownKey rests the cooldown key k for d because of reason.
func (s *core) coolDownKey(ctx context.Context, k, reason string, d time.Duration) (bool, error) {
	ms := max(d.Milliseconds(), 1)
	n, err := coolDown.Run(ctx, s.r, []string{k}, reason, ms).Int()
	if err != nil {
		return false, fmt.Errorf("state: key cooldown: %w", err)
	}
	return n == 1, nil
}

// resting reads the rests of fps, whose cooldown keys key names: one PTTL each in
// one round trip, and a second round trip for the reasons of the keys that rest
// (rare: most lookups find every key usable).
func (s *core) resting(ctx context.Context, fps []string, key func(fp string) string) ([]provider.Rest, error) {
	ttls := make([]*redis.DurationCmd, len(fps))
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, fp := range fps {
			ttls[i] = p.PTTL(ctx, key(fp))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: key cooldowns: %w", err)
	}
	out := make([]provider.Rest, len(fps))
	var resting []int
	for i := range fps {
		if left := ttls[i].Val(); left > 0 {
			out[i].Left = left
			resting = append(resting, i)
		}
	}
	if len(resting) == 0 {
		return out, nil
	}
	vals := make([]*redis.StringCmd, len(resting))
	_, err = s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range resting {
			vals[j] = p.Get(ctx, key(fps[i]))
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("state: key cooldowns: %w", err)
	}
	for j, i := range resting {
		out[i].Reason = provider.Kind(vals[j].Val())
	}
	return out, nil
}
