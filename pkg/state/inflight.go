package state

import (
	"context"
	"fmt"
	"time"
)

// Inflight is where a tenant's search stands among identical ones in flight
// (Searches.ClaimInflight).
type Inflight struct {
	// Claimed: the caller runs the search (and FinishInflight ends its claim).
	Claimed bool
	// Result is what the identical search the caller waited on recorded.
	Result []byte
	// Left is how long another caller's claim has to run, when neither is set.
	Left time.Duration
}

var (
	claimInflight  = script("claim_inflight")  // lua/claim_inflight.lua
	finishInflight = script("finish_inflight") // lua/finish_inflight.lua
)

// ClaimInflight claims a tenant's search of engine for a normalized query (by its
// hash) for owner, for ttl, unless an identical search of the tenant's is in flight
// under another owner; a caller that found it so before (waited) and finds it
// ended gets the result it recorded. Only the tenant's own searches share one.
func (s *Searches) ClaimInflight(ctx context.Context, tenant, engine, queryHash, owner string, ttl time.Duration, waited bool) (Inflight, error) {
	w := "0"
	if waited {
		w = "1"
	}
	claim := s.K.SearchInflight(tenant, engine, queryHash)
	v, err := claimInflight.Run(ctx, s.r, []string{claim, claim + ":r"}, owner, ttl.Milliseconds(), w).Slice()
	if err != nil || len(v) == 0 {
		return Inflight{}, fmt.Errorf("state: claiming a search in flight: %v", err)
	}
	switch code, _ := v[0].(int64); {
	case code == 1:
		return Inflight{Claimed: true}, nil
	case code == 2 && len(v) == 2:
		r, _ := v[1].(string)
		return Inflight{Result: []byte(r)}, nil
	case code == 0 && len(v) == 2:
		ms, _ := v[1].(int64)
		return Inflight{Left: time.Duration(max(ms, 0)) * time.Millisecond}, nil
	}
	return Inflight{}, fmt.Errorf("state: claiming a search in flight: unexpected reply %v", v)
}

// FinishInflight ends owner's claim of a search in flight, keeping result (nil: the
// search failed) for keep for the identical searches that wait on it.
func (s *Searches) FinishInflight(ctx context.Context, tenant, engine, queryHash, owner string, result []byte, keep time.Duration) error {
	claim := s.K.SearchInflight(tenant, engine, queryHash)
	if err := finishInflight.Run(ctx, s.r, []string{claim, claim + ":r"}, owner, result, keep.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("state: ending a search in flight: %w", err)
	}
	return nil
}
