package statefake

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// The chat chain (state/chain.go, store.go): jobs, their chains, hop leases, sticky
// conversations, deadlines, and the endings of jobs.Ender and the reaper.

// CreateJob stores a new job (status queued unless set) and registers its deadline.
func (m *Memory) CreateJob(_ context.Context, j *state.Job) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.jobs[j.ID]; ok {
		return state.ErrExists
	}
	if j.Created.IsZero() {
		j.Created = time.Now().UTC()
	}
	j.Updated = j.Created
	if j.Status == "" {
		j.Status = state.Queued
	}
	c := *j
	m.jobs[j.ID] = &c
	if !j.Deadline.IsZero() {
		m.deadlines[j.ID] = j.Deadline
	}
	return nil
}

// Job returns a copy of a job record, or nil.
func (m *Memory) Job(id string) *state.Job {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j, ok := m.jobs[id]; ok {
		c := *j
		return &c
	}
	return nil
}

func (m *Memory) chain(id string) *memChain {
	c, ok := m.chains[id]
	if !ok {
		c = &memChain{turns: map[int][]byte{}, calls: map[int][]byte{}, expected: map[int]int{}, count: map[int]int{}, results: map[int]map[string][]byte{}, place: map[string]int{}}
		m.chains[id] = c
	}
	return c
}

func leaseKey(id string, h int) string { return id + "/" + strconv.Itoa(h) }

// lease claims key for owner: 0 when owner holds it (renewed), else what the current
// holder has left (at least 1ms).
func (m *Memory) lease(key, owner string, ttl time.Duration) time.Duration {
	now := time.Now()
	l, ok := m.leases[key]
	if ok && l.owner != owner && (l.kept || now.Before(l.until)) {
		if l.kept {
			return l.ttl
		}
		return max(l.until.Sub(now), time.Millisecond)
	}
	if ok && l.owner == owner && l.kept {
		return 0
	}
	m.leases[key] = &memLease{owner: owner, until: now.Add(ttl), ttl: ttl}
	return 0
}

func (m *Memory) step(id string) (*state.Step, error) {
	j, ok := m.jobs[id]
	if !ok {
		return nil, state.ErrNotFound
	}
	job := *j
	st := &state.Step{Job: &job, Chain: &state.Chain{Hops: map[int]*state.Hop{}}}
	if c, ok := m.chains[id]; ok {
		ch := st.Chain
		ch.Sticky, ch.GooglePreferred, ch.Searches = c.sticky, c.gp, c.searches
		for h, t := range c.turns {
			ch.Hop(h).Turn = clone(t)
		}
		for h, cs := range c.calls {
			ch.Hop(h).Calls = clone(cs)
		}
		for h, n := range c.expected {
			ch.Hop(h).Expected = n
		}
		for h, rs := range c.results {
			for call, r := range rs {
				ch.Hop(h).Results[call] = clone(r)
			}
		}
	}
	return st, nil
}

func clone(b []byte) json.RawMessage { return json.RawMessage(slices.Clone(b)) }

// LoadStep implements chat.ChainStore.
func (m *Memory) LoadStep(_ context.Context, id string, claim *state.Claim) (*state.Step, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var left time.Duration
	if claim != nil {
		left = m.lease(leaseKey(id, claim.Hop), claim.Owner, claim.TTL)
	}
	st, err := m.step(id)
	if err != nil {
		return nil, err
	}
	if claim != nil {
		st.Claimed, st.Left = left == 0, left
	}
	return st, nil
}

// store stores a result once, counts it and notes its place among its hop's results;
// it returns the result's place. m.mu is held.
func (c *memChain) store(h int, call string, result []byte) int {
	if c.results[h] == nil {
		c.results[h] = map[string][]byte{}
	}
	at := strconv.Itoa(h) + "/" + call
	if _, ok := c.results[h][call]; !ok {
		c.results[h][call] = slices.Clone(result)
		c.count[h]++
		c.place[at] = c.count[h]
	}
	return c.place[at]
}

// record stores a result once and counts it; the result whose place completes the
// hop claims hop h+1 for owner (if set). It returns the result's place, the hop's
// expected count and the lease outcome (-1: not tried).
func (m *Memory) record(id string, h int, call string, result []byte, owner string, ttl time.Duration) (have, want int, lease time.Duration) {
	c := m.chain(id)
	have, lease = c.store(h, call, result), -1
	want, ok := c.expected[h]
	if !ok {
		want = -1
	}
	if have == want && owner != "" {
		lease = m.lease(leaseKey(id, h+1), owner, ttl)
	}
	return have, want, lease
}

// RecordAndLoad implements chat.ChainStore.
func (m *Memory) RecordAndLoad(_ context.Context, id string, h int, call string, result []byte, owner string, ttl time.Duration) (*state.Step, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	have, want, lease := m.record(id, h, call, result, owner, ttl)
	st, err := m.step(id)
	if err != nil {
		return nil, err
	}
	st.Have, st.Want = have, want
	st.Claimed, st.Left = lease == 0, max(lease, 0)
	return st, nil
}

// RecordResult implements chat.ChainStore.
func (m *Memory) RecordResult(_ context.Context, id string, h int, call string, result []byte) (int, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	have, want, _ := m.record(id, h, call, result, "", 0)
	return have, want, nil
}

// SaveTurn implements chat.ChainStore.
func (m *Memory) SaveTurn(_ context.Context, id string, h int, turn []byte, sticky, googlePreferred bool) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.chain(id)
	if _, ok := c.turns[h]; !ok {
		c.turns[h] = slices.Clone(turn)
	}
	if h == 0 {
		c.sticky, c.gp = sticky, googlePreferred
		if j, ok := m.jobs[id]; ok && j.Status == state.Queued {
			j.Status, j.Updated = state.Running, time.Now().UTC()
		}
	}
	return clone(c.turns[h]), nil
}

// SaveCalls implements chat.ChainStore.
func (m *Memory) SaveCalls(_ context.Context, id string, h int, calls []byte, expected, searches int) (state.Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.chain(id)
	if _, ok := c.calls[h]; !ok {
		c.calls[h] = slices.Clone(calls)
		c.expected[h] = expected
		c.searches += searches
	}
	c.sticky = true
	if j, ok := m.jobs[id]; ok {
		return j.Status, nil
	}
	return "", nil
}

// SaveTurnAndCalls implements chat.ChainStore.
func (m *Memory) SaveTurnAndCalls(_ context.Context, id string, h int, turn []byte, sticky, googlePreferred bool, calls []byte, expected, searches int) (state.Status, json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return "", clone(turn), nil
	}
	c := m.chain(id)
	if t, ok := c.turns[h]; ok && !bytes.Equal(t, turn) {
		return j.Status, clone(t), nil
	}
	c.turns[h] = slices.Clone(turn)
	if h == 0 {
		c.sticky, c.gp = sticky, googlePreferred
		if j.Status == state.Queued {
			j.Status, j.Updated = state.Running, time.Now().UTC()
		}
	}
	if !j.Status.Terminal() {
		if _, ok := c.calls[h]; !ok {
			c.calls[h] = slices.Clone(calls)
			c.expected[h] = expected
			c.searches += searches
		}
		c.sticky = true
	}
	return j.Status, clone(turn), nil
}

// KeepHop implements chat.ChainStore: the lease does not lapse until released.
func (m *Memory) KeepHop(id string, h int, owner string, ttl time.Duration) func(drop bool) {
	key := leaseKey(id, h)
	m.mu.Lock()
	if m.lease(key, owner, ttl) == 0 {
		m.leases[key].kept = true
	}
	m.mu.Unlock()
	return m.releaser(key, owner, ttl)
}

// StickyConversation implements chat.ChainStore.
func (m *Memory) StickyConversation(_ context.Context, hash string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.sticky[hash]
	return ok && time.Now().Before(until), nil
}

// MarkStickyConversation implements chat.ChainStore.
func (m *Memory) MarkStickyConversation(_ context.Context, hash string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sticky[hash] = time.Now().Add(ttl)
	return nil
}

// Finish implements jobs.Store.
func (m *Memory) Finish(_ context.Context, id string, status state.Status, fields ...any) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok || j.Status.Terminal() {
		return false, nil
	}
	for i := 0; i+1 < len(fields); i += 2 { // a hop's answer, first write wins
		fw, ok := fields[i+1].(state.FirstWrite)
		name, _ := fields[i].(string)
		h, isTurn := state.HopOfTurnField(name)
		if !ok || !isTurn {
			continue
		}
		c := m.chain(id)
		if t, ok := c.turns[h]; ok && !bytes.Equal(t, fw) {
			return false, state.ErrAnswerStood
		}
		c.turns[h] = slices.Clone(fw)
	}
	now := time.Now().UTC()
	if status != "" {
		j.Status = status
		if status.Terminal() {
			j.Finished = now // the deadline stays until ForgetDeadline (see jobs.Finisher)
		}
	}
	j.Updated = now
	for i := 0; i+1 < len(fields); i += 2 {
		name, _ := fields[i].(string)
		var raw json.RawMessage
		switch v := fields[i+1].(type) {
		case json.RawMessage:
			raw = clone(v)
		case []byte:
			raw = clone(v)
		case string:
			raw = json.RawMessage(v)
		case *state.JobError:
			e := *v
			j.Error = &e
			continue
		}
		switch name {
		case "response":
			j.Response = raw
		case "usage":
			j.Usage = raw
		case "trace":
			j.Trace = raw
		}
	}
	return true, nil
}

// Settle implements jobs.Store.
func (m *Memory) Settle(_ context.Context, id string, status state.Status, je *state.JobError) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return nil
	}
	now := time.Now().UTC()
	j.Status, j.Updated = status, now
	if j.Finished.IsZero() {
		j.Finished = now
	}
	if je != nil {
		e := *je
		j.Error = &e
	}
	return nil
}

// JobStatus implements jobs.Store.
func (m *Memory) JobStatus(_ context.Context, id string) (state.Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return "", state.ErrNotFound
	}
	return j.Status, nil
}

// GetJob implements jobs.Store.
func (m *Memory) GetJob(_ context.Context, id string) (*state.Job, error) {
	if j := m.Job(id); j != nil {
		return j, nil
	}
	return nil, state.ErrNotFound
}

// LockReaper implements jobs.ReaperStore.
func (m *Memory) LockReaper(_ context.Context, owner string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	const key = "reaper"
	if l, ok := m.leases[key]; ok && time.Now().Before(l.until) {
		return false, nil
	}
	m.leases[key] = &memLease{owner: owner, until: time.Now().Add(ttl), ttl: ttl}
	return true, nil
}

// Overdue implements jobs.ReaperStore.
func (m *Memory) Overdue(_ context.Context, now time.Time, n int64) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id, d := range m.deadlines {
		if !d.After(now) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return m.deadlines[a].Compare(m.deadlines[b]) })
	if int64(len(ids)) > n {
		ids = ids[:n]
	}
	return ids, nil
}

// ForgetDeadline implements jobs.Store.
func (m *Memory) ForgetDeadline(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.deadlines, id)
	return nil
}

// RestoreDeadline implements jobs.Store.
func (m *Memory) RestoreDeadline(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deadlines[id] = at
	return nil
}

// releaser gives back a kept lease once: with drop at once, else it lapses after ttl,
// as the Redis store's keepers do. Only owner's lease is touched.
func (m *Memory) releaser(key, owner string, ttl time.Duration) func(drop bool) {
	var once sync.Once
	return func(drop bool) {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			l, ok := m.leases[key]
			if !ok || l.owner != owner {
				return
			}
			if drop {
				delete(m.leases, key)
				return
			}
			l.kept, l.until = false, time.Now().Add(ttl)
		})
	}
}
