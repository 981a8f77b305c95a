package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Inflight is where a tenant's search stands among identical ones
// (Searches.ClaimInflight): claimed by the caller, or held by another call, whose
// outcome the caller can read (Searches.CallOutcome) once it is stored.
type Inflight struct {
	Claimed bool
	// Job, Hop and Call name the call that holds the search; Left is how long its
	// claim has to run.
	Job  string
	Hop  int
	Call string
	Left time.Duration
}

// Holder is how a claim names its call (ClaimInflight's prev).
func (in Inflight) Holder() string { return inflightOwner(in.Job, in.Hop, in.Call) }

func inflightOwner(job string, h int, call string) string {
	return job + " " + strconv.Itoa(h) + " " + call
}

var claimInflight = script("claim_inflight") // lua/claim_inflight.lua

// ClaimInflight claims a tenant's search of engine for a normalized query (by its
// hash) for the call (job, h, call), for ttl, unless another call holds it (a claim
// is one SET NX): an identical search then reads that call's stored outcome instead
// of paying. prev (Inflight.Holder; "" none) is a holder whose outcome turned out to be no use
// (a failed search, a job gone): its claim is taken over.
func (s *Searches) ClaimInflight(ctx context.Context, tenant, engine, queryHash, job string, h int, call string, ttl time.Duration, prev string) (Inflight, error) {
	key, owner := s.K.searchInflight(tenant, engine, queryHash), inflightOwner(job, h, call)
	if prev == "" {
		ok, err := s.r.SetNX(ctx, key, owner, ttl).Result()
		if err != nil {
			return Inflight{}, fmt.Errorf("state: claiming a search in flight: %w", err)
		}
		if ok {
			return Inflight{Claimed: true}, nil
		}
	}
	v, err := claimInflight.Run(ctx, s.r, []string{key}, owner, ttl.Milliseconds(), prev).Slice()
	if err != nil || len(v) == 0 {
		return Inflight{}, fmt.Errorf("state: claiming a search in flight: %v", err)
	}
	if c, _ := v[0].(int64); c == 1 {
		return Inflight{Claimed: true}, nil
	}
	holder, _ := v[1].(string)
	ms, _ := v[2].(int64)
	f := strings.SplitN(holder, " ", 3)
	if len(f) != 3 {
		return Inflight{}, fmt.Errorf("state: claiming a search in flight: a claim of %q", holder)
	}
	hop, _ := strconv.Atoi(f[1])
	return Inflight{Job: f[0], Hop: hop, Call: f[2], Left: time.Duration(max(ms, 0)) * time.Millisecond}, nil
}

// ReleaseInflight frees the call's claim of a search, its outcome stored, so the
// identical searches waiting on it read it (or run their own) at once.
func (s *Searches) ReleaseInflight(ctx context.Context, tenant, engine, queryHash, job string, h int, call string) error {
	return s.release(ctx, s.K.searchInflight(tenant, engine, queryHash), inflightOwner(job, h, call))
}

// CallOutcome reads a call's stored outcome (nil while it has none; as
// SearchStart.Done has it), the result its job recorded under addr (nil: none; a
// search's outcome leaves the job's hash when its chain reads it, its recording
// stays), and whether its job still runs.
func (s *Searches) CallOutcome(ctx context.Context, id string, h int, call, addr string) (outcome, recorded []byte, live bool, err error) {
	v, err := s.r.HMGet(ctx, s.K.Job(id), "status", callField(prefixOutcome, h, call), resultField(h, call), recordedField(addr)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, false, fmt.Errorf("state: reading a call's outcome: %w", err)
	}
	str := func(x any) string { s, _ := x.(string); return s }
	st := Status(str(v[0]))
	live = st != "" && !st.Terminal()
	for _, x := range v[1:3] {
		if b := str(x); b != "" {
			outcome = []byte(b)
			break
		}
	}
	if b := str(v[3]); b != "" {
		recorded = []byte(b)
	}
	return outcome, recorded, live, nil
}
