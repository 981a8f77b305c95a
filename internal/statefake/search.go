package statefake

import (
	"context"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Search and fetch calls (state/store.go, fallback.go, search.go, ratelimit.go,
// cooldown.go): leases, stored outcomes, fallback hand-offs, the per-tenant cache,
// the engines' rate limits and key cooldowns.

type fallback struct {
	engine string
	tried  []byte
}

type cached struct {
	b     []byte
	until time.Time
}

type bucket struct{ tat float64 } // GCRA's theoretical arrival time, ms

func callKey(id string, h int, call string) string {
	return id + "/" + strconv.Itoa(h) + "/" + call
}

// StartSearch implements search.Calls.
func (m *Memory) StartSearch(_ context.Context, id string, h int, call, owner string, ttl time.Duration, pay *state.Pay) (*state.SearchStart, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := callKey(id, h, call)
	st := &state.SearchStart{}
	if j, ok := m.jobs[id]; ok {
		st.Status, st.Tenant = j.Status, j.Tenant
	}
	if b, ok := m.done[k]; ok {
		st.Done = slices.Clone(b)
	} else if c, ok := m.chains[id]; ok && c.results[h][call] != nil && !st.Status.Terminal() {
		st.Done = slices.Clone(c.results[h][call])
	}
	if fb, ok := m.fallbacks[k]; ok {
		st.Fallback = &state.Fallback{Engine: fb.engine, Tried: slices.Clone(fb.tried)}
	}
	left := m.lease("search/"+k, owner, ttl)
	st.Claimed, st.Left = left == 0, left
	if pay != nil && st.Claimed && st.Done == nil && st.Status != "" && !st.Status.Terminal() && (st.Fallback == nil || st.Fallback.Engine == pay.Engine) {
		jl := m.ledgerOf(m.jobLedgers, id)
		price := toMicros(pay.USD)
		if jl.reserve(pay.Call, price) == "over" {
			st.Refused = &state.Exhausted{Budget: state.BudgetRequest, Limit: fromMicros(jl.cap)}
		} else {
			m.paid[id+"\x00"+pay.Call] = price
			st.Held = &state.Hold{JobID: id, Call: pay.Call}
		}
	}
	return st, nil
}

// KeepSearch implements search.Calls: the lease does not lapse until released; then
// it lapses after ttl (with drop, at once).
func (m *Memory) KeepSearch(id string, h int, call, owner string, ttl time.Duration) func(drop bool) {
	key := "search/" + callKey(id, h, call)
	m.mu.Lock()
	if l, ok := m.leases[key]; ok && l.owner == owner {
		l.kept, l.ttl = true, ttl
	}
	m.mu.Unlock()
	return m.releaser(key, owner, ttl)
}

// ReleaseSearch implements search.Store.
func (m *Memory) ReleaseSearch(_ context.Context, id string, h int, call, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := "search/" + callKey(id, h, call)
	if l, ok := m.leases[key]; ok && l.owner == owner {
		delete(m.leases, key)
	}
	return nil
}

// SaveSearchDone implements search.Calls.
func (m *Memory) SaveSearchDone(_ context.Context, id string, h int, call string, b []byte, rec *state.Recording) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done[callKey(id, h, call)] = slices.Clone(b)
	if rec != nil {
		m.recordResult(id, rec.Addr, rec.Result)
	}
	return nil
}

// SaveSearchResult implements search.Calls: a job that is gone gets nothing stored.
func (m *Memory) SaveSearchResult(_ context.Context, id string, h int, call string, b []byte, rec *state.Recording) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.jobs[id]; !ok {
		return nil
	}
	m.chain(id).store(h, call, b)
	if rec != nil {
		m.recordResult(id, rec.Addr, rec.Result)
	}
	return nil
}

// HandOff implements search.Store.
func (m *Memory) HandOff(_ context.Context, id string, h int, call, from, to string, tried []byte) (*state.Fallback, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := callKey(id, h, call)
	if cur, ok := m.fallbacks[k]; ok && cur.engine != from {
		return &state.Fallback{Engine: cur.engine, Tried: slices.Clone(cur.tried)}, nil
	}
	m.fallbacks[k] = &fallback{engine: to, tried: slices.Clone(tried)}
	return &state.Fallback{Engine: to, Tried: slices.Clone(tried)}, nil
}

func cacheKey(tenant, engine, q string) string { return tenant + "/" + engine + "/" + q }

// CachedSearch implements search.Store.
func (m *Memory) CachedSearch(_ context.Context, tenant, engine, queryHash string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.cache[cacheKey(tenant, engine, queryHash)]
	if !ok || !time.Now().Before(c.until) {
		return nil, state.ErrNotFound
	}
	return slices.Clone(c.b), nil
}

// CacheSearch implements search.Store.
func (m *Memory) CacheSearch(_ context.Context, tenant, engine, queryHash string, result []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cache[cacheKey(tenant, engine, queryHash)] = cached{b: slices.Clone(result), until: time.Now().Add(ttl)}
	return nil
}

// Allow implements search.Store: the generic cell rate algorithm of state.Allow.
func (m *Memory) Allow(_ context.Context, engine string, perSecond float64, burst int) (time.Duration, error) {
	if perSecond <= 0 {
		return 0, nil
	}
	burst = max(burst, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := float64(time.Now().UnixMilli())
	emission := 1000 / perSecond
	tolerance := emission * float64(burst-1)
	b, ok := m.buckets[engine]
	if !ok {
		b = &bucket{tat: now}
		m.buckets[engine] = b
	}
	tat := max(b.tat, now)
	if allowAt := tat - tolerance; now < allowAt {
		return time.Duration(math.Ceil(allowAt-now)) * time.Millisecond, nil
	}
	b.tat = tat + emission
	return 0, nil
}

// CoolDown implements engines.Cooldowns: a longer rest already running is kept.
func (m *Memory) CoolDown(_ context.Context, engine, fp string, reason engines.ErrorKind, d time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := "\x00cool/" + engine + "/" + fp
	now := time.Now()
	d = max(d, time.Millisecond)
	var left time.Duration
	if c, ok := m.cache[k]; ok {
		left = c.until.Sub(now)
	}
	if left >= d {
		return false, nil
	}
	m.cache[k] = cached{b: []byte(reason), until: now.Add(d)}
	return left <= 0, nil
}

// Resting implements engines.Cooldowns.
func (m *Memory) Resting(_ context.Context, engine string, fps []string) ([]engines.Rest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	out := make([]engines.Rest, len(fps))
	for i, fp := range fps {
		if c, ok := m.cache["\x00cool/"+engine+"/"+fp]; ok && c.until.After(now) {
			out[i] = engines.Rest{Left: c.until.Sub(now), Reason: engines.ErrorKind(c.b)}
		}
	}
	return out, nil
}
