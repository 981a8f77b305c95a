package state

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The chain state of a job lives in the job's own hash (Keys.Job), beside the
// record's fields, so one read gives a step the job and its chain and one write
// stores a step, and the chain needs no TTL of its own. Its fields are spelled here
// and only here (every one holds a ':' but the three flags, and no record field
// does): the Lua scripts below are handed the field names they touch, and the chat
// worker sees the decoded Chain, never a field name.
//
//	m:<hop>            the hop's model answer (first write wins)
//	calls:<hop>        the hop's dispatched server-tool calls (first write wins)
//	n:<hop>            how many results the hop waits for
//	c:<hop>            how many results are recorded
//	r:<hop>:<call>     one call's result (first write wins): a search's or fetch's is
//	                   stored by its worker (SaveSearchResult), a call answered at
//	                   dispatch by the chat worker
//	sticky, gp         the chain's web_search flags
//	searches           searches dispatched so far (the per-job limit)
const (
	fieldSticky          = "sticky"
	fieldGooglePreferred = "gp"
	fieldSearches        = "searches"

	prefixTurn     = "m"
	prefixCalls    = "calls"
	prefixExpected = "n"
	prefixCount    = "c"
	prefixResult   = "r"
)

func hopField(prefix string, h int) string { return prefix + ":" + strconv.Itoa(h) }

// isChainField reports whether a job hash field is the chain's.
func isChainField(f string) bool {
	switch f {
	case fieldSticky, fieldGooglePreferred, fieldSearches:
		return true
	}
	kind, _, ok := strings.Cut(f, ":")
	if !ok {
		return false
	}
	switch kind {
	case prefixTurn, prefixCalls, prefixExpected, prefixCount, prefixResult:
		return true
	}
	return false
}

func resultField(h int, call string) string { return hopField(prefixResult, h) + ":" + call }

// Chain is the chain state of one job. Its per-hop values are opaque JSON owned by the
// chat worker; the store only guarantees each is written once.
type Chain struct {
	Hops            map[int]*Hop
	Sticky          bool
	GooglePreferred bool
	// Searches counts the searches dispatched so far (the per-job search limit).
	Searches int
}

// Hop is one model call and the server-tool calls it made.
type Hop struct {
	// Turn is the stored model answer of this hop (nil until the model answered).
	Turn json.RawMessage
	// Calls are the server-tool calls dispatched for this hop.
	Calls json.RawMessage
	// Expected is how many results the hop waits for (-1 until dispatched).
	Expected int
	// Results are the recorded results by call id.
	Results map[string]json.RawMessage
}

// Hop returns hop h, creating an empty one.
func (c *Chain) Hop(h int) *Hop {
	if c.Hops == nil {
		c.Hops = map[int]*Hop{}
	}
	if hp, ok := c.Hops[h]; ok {
		return hp
	}
	hp := &Hop{Expected: -1, Results: map[string]json.RawMessage{}}
	c.Hops[h] = hp
	return hp
}

func chainFromHash(m map[string]string) *Chain {
	c := &Chain{Hops: map[int]*Hop{}}
	for k, v := range m {
		switch {
		case k == fieldSticky:
			c.Sticky = v == "1"
		case k == fieldGooglePreferred:
			c.GooglePreferred = v == "1"
		case k == fieldSearches:
			c.Searches, _ = strconv.Atoi(v)
		default:
			kind, rest, ok := strings.Cut(k, ":")
			if !ok {
				continue
			}
			hs, call, _ := strings.Cut(rest, ":")
			h, err := strconv.Atoi(hs)
			if err != nil {
				continue
			}
			switch kind {
			case prefixTurn:
				c.Hop(h).Turn = json.RawMessage(v)
			case prefixCalls:
				c.Hop(h).Calls = json.RawMessage(v)
			case prefixExpected:
				c.Hop(h).Expected, _ = strconv.Atoi(v)
			case prefixResult:
				c.Hop(h).Results[call] = json.RawMessage(v)
			}
		}
	}
	return c
}

// Claim asks for a hop's lease along with a step's reads.
type Claim struct {
	Hop   int
	Owner string
	TTL   time.Duration
}

// Step is what a chat step reads before acting.
type Step struct {
	Job   *Job
	Chain *Chain
	// Claimed reports whether the asked-for lease is held by the caller; Left is how
	// long another holder's lease has.
	Claimed bool
	Left    time.Duration
	// Have is a recorded result's place among its hop's results (RecordAndLoad), in
	// the order they were stored; Want how many the hop waits for (-1: not
	// dispatched). The result with Have == Want completed the hop.
	Have, Want int
}

// LoadStep reads a job and its chain and, if claim is set, claims its hop's lease, in
// one round trip: a free lease (the common case) is taken with a SET NX beside the
// read; one that is held already is looked at again (Lease: its holder renews it,
// anyone else learns the time it has left).
func (s *Chains) LoadStep(ctx context.Context, id string, claim *Claim) (*Step, error) {
	var jc *redis.MapStringStringCmd
	var took *redis.BoolCmd
	err := s.pipelined(ctx, func(p redis.Pipeliner) {
		jc = p.HGetAll(ctx, s.K.Job(id))
		if claim != nil {
			took = p.SetNX(ctx, s.K.Lease(id, claim.Hop), claim.Owner, claim.TTL)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("state: reading job and chain: %w", err)
	}
	st, err := s.step(jc.Val())
	if err != nil || claim == nil {
		return st, err
	}
	if took.Val() {
		st.Claimed = true
		return st, nil
	}
	if st.Claimed, st.Left, err = s.lease(ctx, s.K.Lease(id, claim.Hop), claim.Owner, claim.TTL); err != nil {
		return nil, err
	}
	return st, nil
}

// step is the Step of the job whose hash holds jm.
func (s *core) step(jm map[string]string) (*Step, error) {
	if len(jm) == 0 || jm["id"] == "" {
		return nil, ErrNotFound
	}
	return &Step{Job: jobFromHash(jm), Chain: chainFromHash(jm)}, nil
}

// recordResult stores a call's result once, counts it and notes its place among its
// hop's results; the result whose place completes the hop claims the next hop's lease
// for the caller. (lua/record_result.lua)
var recordResult = script("record_result")

func (s *core) recordArgs(id string, h int, call string, result []byte, owner string, ttl time.Duration, load bool) ([]string, []any) {
	return []string{s.K.Job(id), s.K.Lease(id, h+1)},
		[]any{resultField(h, call), hopField(prefixCount, h), hopField(prefixExpected, h), result, owner, ttl.Milliseconds(), flag(load), callField(prefixPlace, h, call)}
}

// RecordAndLoad records the result of one call of hop h (the first write wins; a
// replay changes nothing), and reads the job and chain after it, in one round trip:
// one script, whose one read of the job's hash both decides and is returned (no
// second read beside it). A result the search worker stored (SaveSearchResult) is
// read, not written. When the result completed the hop (Have == Want: the last of its
// results stored, whenever it is recorded or replayed), the lease of hop h+1 is
// claimed for owner; no other result of the hop claims it.
func (s *Chains) RecordAndLoad(ctx context.Context, id string, h int, call string, result []byte, owner string, ttl time.Duration) (*Step, error) {
	keys, argv := s.recordArgs(id, h, call, result, owner, ttl, true)
	v, err := recordResult.Run(ctx, s.r, keys, argv...).Slice()
	if err != nil {
		return nil, fmt.Errorf("state: recording result: %w", err)
	}
	if len(v) < 3 {
		return nil, fmt.Errorf("state: recording result: a reply of %d values", len(v))
	}
	var flat []any
	if len(v) > 3 {
		flat, _ = v[3].([]any)
	}
	jm := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		jm[k], _ = flat[i+1].(string)
	}
	st, err := s.step(jm)
	if err != nil {
		return nil, err
	}
	have, _ := v[0].(int64)
	want, _ := v[1].(int64)
	left, _ := v[2].(int64)
	st.Have, st.Want = int(have), int(want)
	st.Claimed, st.Left = left == 0, time.Duration(max(left, 0))*time.Millisecond
	return st, nil
}

// RecordResult records a result without reading anything back (calls answered at
// dispatch). It returns the result's place among its hop's results and how many the
// hop waits for.
func (s *Chains) RecordResult(ctx context.Context, id string, h int, call string, result []byte) (have, want int, err error) {
	keys, argv := s.recordArgs(id, h, call, result, "", time.Millisecond, false)
	v, err := recordResult.Run(ctx, s.r, keys, argv...).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("state: recording result: %w", err)
	}
	return int(v[0]), int(v[1]), nil
}

// saveTurn stores hop h's model answer unless one is stored and returns the stored
// answer. (lua/save_turn.lua)
var saveTurn = script("save_turn")

// SaveTurn stores the model's answer for hop h unless one is stored already, and
// returns the stored one (so two racing workers agree on a single answer). On hop 0
// it also records the chain's sticky and Google-preferred flags and marks a queued
// job running, in the same round trip.
func (s *Chains) SaveTurn(ctx context.Context, id string, h int, turn []byte, sticky, googlePreferred bool) (json.RawMessage, error) {
	v, err := saveTurn.Run(ctx, s.r, []string{s.K.Job(id)}, hopField(prefixTurn, h), turn,
		flag(h == 0), flag(sticky), flag(googlePreferred), Millis(time.Now())).Text()
	if err != nil {
		return nil, fmt.Errorf("state: storing model turn: %w", err)
	}
	return json.RawMessage(v), nil
}

func flag(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// recordDispatch writes a hop's calls and expected count once, adds its searches to
// the job's counter only the first time, marks the chain sticky, and returns the job's
// status; a job that has ended (or is gone) gets nothing written.
// (lua/record_dispatch.lua)
var recordDispatch = script("record_dispatch")

// SaveCalls records the calls of hop h (once): their JSON, how many results the hop
// waits for, and how many are searches; a web_search call makes the chain sticky. It
// returns the job's status, so a job cancelled meanwhile makes no searches.
func (s *Chains) SaveCalls(ctx context.Context, id string, h int, calls []byte, expected, searches int) (Status, error) {
	st, err := recordDispatch.Run(ctx, s.r, []string{s.K.Job(id)},
		hopField(prefixCalls, h), calls, hopField(prefixExpected, h), expected, fieldSearches, searches, fieldSticky).Text()
	if err != nil {
		return "", fmt.Errorf("state: recording calls: %w", err)
	}
	return Status(st), nil
}

// saveTurnCalls stores a hop's model answer and its dispatched calls: save_turn.lua's
// writes, then record_dispatch.lua's, in one HSET. (lua/save_turn_calls.lua)
var saveTurnCalls = script("save_turn_calls")

// SaveTurnAndCalls stores hop h's model answer (as SaveTurn) and the calls
// dispatched for it (as SaveCalls) in one round trip, and returns the job's status
// and the answer stored. When another answer was stored first, that one is returned
// and nothing is written: the calls were planned from an answer that does not stand.
func (s *Chains) SaveTurnAndCalls(ctx context.Context, id string, h int, turn []byte, sticky, googlePreferred bool, calls []byte, expected, searches int) (Status, json.RawMessage, error) {
	v, err := saveTurnCalls.Run(ctx, s.r, []string{s.K.Job(id)}, hopField(prefixTurn, h), turn,
		flag(h == 0), flag(sticky), flag(googlePreferred), Millis(time.Now()),
		hopField(prefixCalls, h), calls, hopField(prefixExpected, h), expected, searches).StringSlice()
	if err != nil || len(v) != 2 {
		return "", nil, fmt.Errorf("state: storing a model turn and its calls: %v", err)
	}
	return Status(v[0]), json.RawMessage(v[1]), nil
}

// KeepHop holds the lease of hop h of a job (claimed by LoadStep or RecordAndLoad)
// for owner until the returned function is called; see KeepAlive.
func (s *Chains) KeepHop(id string, h int, owner string, ttl time.Duration) func(drop bool) {
	return s.keepAlive(s.K.Lease(id, h), owner, ttl)
}

// LockReaper takes the deadline reaper's lock for ttl, reporting whether owner got it:
// one chat worker sweeps at a time.
func (s *Jobs) LockReaper(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	return s.tryLock(ctx, s.K.reaperLock(), owner, ttl)
}
