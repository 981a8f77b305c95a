package engines

import (
	"context"
	"fmt"
	"time"
)

// Normalize parses recorded response bodies with kind's parser and applies the shared
// normalization, with no HTTP: what a search costs after the bytes arrive. Tests and
// benchmarks in engines_test reach it as engines.Normalize.
func Normalize(cfg Config, q Query, bodies ...[]byte) (*Result, error) {
	if cfg.ID == "" {
		cfg.ID = cfg.Kind
	}
	f, ok := kinds[cfg.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", cfg.Kind)
	}
	e, err := f(cfg, nil)
	if err != nil {
		return nil, err
	}
	p, ok := e.(parser)
	if !ok {
		return nil, fmt.Errorf("kind %q has no parse method", cfg.Kind)
	}
	q, err = CheckQuery(q)
	if err != nil {
		return nil, err
	}
	res, err := p.parse(q, bodies)
	if err != nil {
		return nil, err
	}
	n := newNormalized(cfg.ID, e)
	finish(res, cfg.ID, q, n.caps, time.Now())
	Render(res)
	return res, nil
}

// stubEngine answers every search with fixed hits and declares caps.
type stubEngine struct {
	caps Capabilities
	hits []Hit
}

func (s stubEngine) Name() string               { return "stub" }
func (s stubEngine) Capabilities() Capabilities { return s.caps }
func (s stubEngine) Search(context.Context, Query) (*Result, error) {
	return &Result{Hits: append([]Hit(nil), s.hits...)}, nil
}

// WithCapabilities is an engine named id that declares caps and answers every search
// with hits, behind the Registry's normalization.
func WithCapabilities(id string, caps Capabilities, hits []Hit) Engine {
	return newNormalized(id, stubEngine{caps: caps, hits: hits})
}
