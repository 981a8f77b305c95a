package engines

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// parser is implemented by every engine kind: it turns the provider's response
// body (or bodies, for kinds that make several calls per search, in call order) into a
// Result, without any I/O. Search is the HTTP exchange followed by parse; benchmarks
// and fixture tests call parse directly through Normalize.
type parser interface {
	parse(q Query, bodies [][]byte) (*Result, error)
}

// parse reads recorded bodies as the answers to one search's calls, in order.
func (g *grounded) parse(q Query, bodies [][]byte) (*Result, error) {
	rp := replay(bodies)
	return g.run(context.Background(), g.caller(&http.Client{Transport: &rp}), q)
}

func (c *chatGrounded) parse(q Query, bodies [][]byte) (*Result, error) {
	rp := replay(bodies)
	return c.kind.run(context.Background(), &http.Client{Transport: &rp}, q)
}

// replay is an HTTP transport that answers the calls of one search with recorded
// bodies, in order (the last again once they run out): parse reads recordings through
// the same model caller a search uses.
type replay [][]byte

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(*r) == 0 {
		return nil, errors.New("no recorded answer")
	}
	body := (*r)[0]
	if len(*r) > 1 {
		*r = (*r)[1:]
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
}

// HonoursTable is the markdown table of what each engine kind does with each option,
// from the kinds' declarations (docs/engine-options.md holds it; a test keeps the two
// the same).
func HonoursTable() string {
	var b strings.Builder
	b.WriteString("| kind |")
	for _, o := range AllOptions {
		fmt.Fprintf(&b, " %s |", o)
	}
	b.WriteString("\n|---|")
	for range AllOptions {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	caps := KindCapabilities()
	short := map[Treatment]string{Honoured: "yes", Applied: "fleet", Weakened: "partial", Unsupported: "no"}
	for _, k := range Kinds() {
		fmt.Fprintf(&b, "| %s |", k)
		for _, o := range AllOptions {
			fmt.Fprintf(&b, " %s |", short[TreatmentOf(caps[k], o)])
		}
		b.WriteString("\n")
	}
	return b.String()
}
