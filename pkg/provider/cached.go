package provider

import (
	"context"
	"sync"
	"time"
)

// Cached returns c with the answers of Resting kept for fresh in this process: every
// model call and every search asks whether its keys rest, and almost always none does,
// so a process asks the shared store at most once per fresh per key instead of once
// per call. A rest this process starts is seen at once (CoolDown updates the cache); a
// rest another process starts is seen within fresh, and a call made meanwhile with the
// resting key at worst meets the provider's refusal and rests it here too.
func Cached(c Cooldowns, fresh time.Duration) Cooldowns {
	return &cached{Cooldowns: c, fresh: fresh, now: time.Now, seen: map[cacheKey]seenRest{}}
}

type cacheKey struct{ scope, fp string }

type seenRest struct {
	rest  Rest      // as read at at
	at    time.Time // when it was read
	until time.Time // when the rest ends (at + rest.Left)
}

type cached struct {
	Cooldowns
	fresh time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[cacheKey]seenRest
}

// maxCached bounds the cache: keys are few (a deployment's API keys), but scopes and
// fingerprints come from configuration, not from clients, so this is a backstop.
const maxCached = 4096

func (c *cached) Resting(ctx context.Context, scope string, fps []string) ([]Rest, error) {
	now := c.now()
	out := make([]Rest, len(fps))
	var miss []int
	c.mu.Lock()
	for i, fp := range fps {
		s, ok := c.seen[cacheKey{scope, fp}]
		if !ok || now.Sub(s.at) >= c.fresh {
			miss = append(miss, i)
			continue
		}
		if left := s.until.Sub(now); left > 0 {
			out[i] = Rest{Left: left, Reason: s.rest.Reason}
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	ask := make([]string, len(miss))
	for j, i := range miss {
		ask[j] = fps[i]
	}
	got, err := c.Cooldowns.Resting(ctx, scope, ask)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.seen) > maxCached {
		clear(c.seen)
	}
	for j, i := range miss {
		out[i] = got[j]
		c.seen[cacheKey{scope, fps[i]}] = seenRest{rest: got[j], at: now, until: now.Add(got[j].Left)}
	}
	c.mu.Unlock()
	return out, nil
}

func (c *cached) CoolDown(ctx context.Context, scope, fp string, reason Kind, d time.Duration) (bool, error) {
	first, err := c.Cooldowns.CoolDown(ctx, scope, fp, reason, d)
	if err == nil {
		now := c.now()
		c.mu.Lock()
		k := cacheKey{scope, fp}
		// A longer rest already seen is kept, as the store keeps it.
		if s, ok := c.seen[k]; !ok || s.until.Before(now.Add(d)) {
			c.seen[k] = seenRest{rest: Rest{Left: d, Reason: reason}, at: now, until: now.Add(d)}
		}
		c.mu.Unlock()
	}
	return first, err
}
