package provider

import (
	"context"
	"sync"
	"testing"
	"time"
)

// countingCooldowns is an in-memory Cooldowns that counts the Resting lookups that
// reach it (the real store's behaviour is checked by the cooldown conformance cases
// in pkg/state's search_conformance_test.go).
type countingCooldowns struct {
	mu      sync.Mutex
	until   map[string]time.Time
	reason  map[string]Kind
	lookups int
	now     func() time.Time
}

func (m *countingCooldowns) CoolDown(_ context.Context, scope, fp string, reason Kind, d time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := scope + "/" + fp
	before := m.until[k].After(m.now())
	if !m.until[k].After(m.now().Add(d)) {
		m.until[k], m.reason[k] = m.now().Add(d), reason
	}
	return !before, nil
}

func (m *countingCooldowns) Resting(_ context.Context, scope string, fps []string) ([]Rest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	out := make([]Rest, len(fps))
	for i, fp := range fps {
		if left := m.until[scope+"/"+fp].Sub(m.now()); left > 0 {
			out[i] = Rest{Left: left, Reason: m.reason[scope+"/"+fp]}
		}
	}
	return out, nil
}

func TestCachedCooldowns(t *testing.T) {
	ctx := context.Background()
	clock := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return clock }
	store := &countingCooldowns{until: map[string]time.Time{}, reason: map[string]Kind{}, now: now}
	c := Cached(store, time.Second).(*cached)
	c.now = now
	fps := []string{"k1", "k2"}

	for range 100 {
		rs, err := c.Resting(ctx, "openai", fps)
		if err != nil || rs[0].Left != 0 || rs[1].Left != 0 {
			t.Fatalf("Resting = %v, %v; want both usable", rs, err)
		}
	}
	if store.lookups != 1 {
		t.Fatalf("100 lookups within a second reached the store %d times, want 1", store.lookups)
	}

	// Another process rests k2: this one sees it once its answer is a second old.
	store.CoolDown(ctx, "openai", "k2", RateLimited, time.Minute)
	if rs, _ := c.Resting(ctx, "openai", fps); rs[1].Left != 0 {
		t.Fatal("a cached answer younger than a second was not used")
	}
	clock = clock.Add(time.Second)
	rs, _ := c.Resting(ctx, "openai", fps)
	if rs[1].Left <= 0 || rs[1].Reason != RateLimited || rs[0].Left != 0 {
		t.Fatalf("after a second, Resting = %+v; want k2 resting (rate limited), k1 usable", rs)
	}

	// A rest started here is seen at once, and counts down with the clock.
	if first, _ := c.CoolDown(ctx, "openai", "k1", Quota, 10*time.Second); !first {
		t.Fatal("k1 was usable: CoolDown should report the first rest")
	}
	clock = clock.Add(500 * time.Millisecond)
	rs, _ = c.Resting(ctx, "openai", fps)
	if rs[0].Left != 9500*time.Millisecond || rs[0].Reason != Quota {
		t.Fatalf("k1 rest = %+v; want 9.5s, quota", rs[0])
	}

	// Scopes do not share answers.
	if rs, _ := c.Resting(ctx, "anthropic", fps); rs[0].Left != 0 || rs[1].Left != 0 {
		t.Fatalf("anthropic's keys = %+v; rests are per scope", rs)
	}
}
