package state

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Fallback is where a search call's engine fallback stands: the engine that runs it
// now, and the failed attempts so far (JSON the search worker writes and reads).
type Fallback struct {
	Engine string
	Tried  []byte
}

// handOff moves a call to another engine if it is still with ARGV[1] (or has never
// moved): KEYS[1] the call's fallback hash; ARGV[1] from, ARGV[2] to, ARGV[3] tried,
// ARGV[4] TTL ms. Returns {engine, tried} as they stand after the call.
var handOff = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'engine')
if cur and cur ~= ARGV[1] then return {cur, redis.call('HGET', KEYS[1], 'tried') or ''} end
redis.call('HSET', KEYS[1], 'engine', ARGV[2], 'tried', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {ARGV[2], ARGV[3]}
`)

// HandOff records that engine from failed a call and that engine to runs it now,
// with the attempts so far (tried), unless the call has already moved on from from
// (a redelivery racing the first hand-off): the first hand-off wins and every caller
// gets the state that stands.
func (s *Store) HandOff(ctx context.Context, id string, h int, call, from, to string, tried []byte) (*Fallback, error) {
	v, err := handOff.Run(ctx, s.r, []string{s.K.SearchFallback(id, h, call)}, from, to, tried, s.Retention.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("state: search fallback: %w", err)
	}
	if len(v) != 2 {
		return nil, fmt.Errorf("state: search fallback: %d values, want 2", len(v))
	}
	return &Fallback{Engine: v[0], Tried: []byte(v[1])}, nil
}
