package state

import (
	"context"
	"fmt"
)

// Fallback is where a search call's engine fallback stands: the engine that runs it
// now, and the failed attempts so far (JSON the search worker writes and reads).
type Fallback struct {
	Engine string
	Tried  []byte
}

// handOff moves a call to another engine if it is still with from (or has never
// moved); nothing is kept for a job that is gone (no hash is made without its TTL).
// (lua/hand_off.lua)
var handOff = script("hand_off")

// HandOff records that engine from failed a call and that engine to runs it now,
// with the attempts so far (tried), unless the call has already moved on from from
// (a redelivery racing the first hand-off): the first hand-off wins and every caller
// gets the state that stands.
func (s *Searches) HandOff(ctx context.Context, id string, h int, call, from, to string, tried []byte) (*Fallback, error) {
	v, err := handOff.Run(ctx, s.r, []string{s.K.Job(id)}, from, to, tried,
		callField(prefixFallbackEngine, h, call), callField(prefixFallbackTried, h, call)).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("state: search fallback: %w", err)
	}
	if len(v) != 2 {
		return nil, fmt.Errorf("state: search fallback: %d values, want 2", len(v))
	}
	return &Fallback{Engine: v[0], Tried: []byte(v[1])}, nil
}
