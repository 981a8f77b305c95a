// Package enginecheck runs the contract check of `fleetctl engines check`: one search
// of each configured engine against its provider, with its configured key, and a
// report of what the provider's answer says about the contract: whether the provider
// was reachable, took the key and answered in a shape the engine's codec reads;
// which fields of the documented shape (the kind's fixture) were missing and which
// were new; and any Deprecation or Sunset header or 404/410 on the endpoint. Offline,
// the same checks run against the fixtures themselves.
package enginecheck

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Fixtures are the documented answer of each engine kind, in call order (a kind that
// makes several calls per search lists several).
var Fixtures = map[string][]string{
	"anthropic":         {"anthropic/pydantic-web-search-sf.response.json"},
	"brave":             {"brave/docs-shape-web-search.CONSTRUCTED.json"},
	"cloudflare":        {"cloudflare/docs-shape-websearch.CONSTRUCTED.json"},
	"exa":               {"exa/docs-shape-search-highlights.CONSTRUCTED.json"},
	"gemini":            {"gemini/pydantic-generate-websearch-sf.response.json"},
	"glm-api":           {"zhipu/realcase-web-search-api-search-std.response.json"},
	"glm-chat":          {"zhipu/glm-chat-finance-zh.CONSTRUCTED.json"},
	"kimi":              {"moonshot/hermoonshotes-round1-tool-calls.response.json", "moonshot/hermoonshotes-round2-final.response.json"},
	"linkup":            {"linkup/docs-shape-search-results.CONSTRUCTED.json"},
	"openai":            {"openai/vercel-responses-web-search-gpt5mini.json"},
	"openrouter":        {"openrouter/pydantic-server-tool-web-search-annotations.response.json"},
	"parallel":          {"parallel/docs-shape-search.CONSTRUCTED.json"},
	"perplexity":        {"perplexity/docs-shape-agent-web-search.CONSTRUCTED.json"},
	"perplexity-search": {"perplexity/docs-shape-search.CONSTRUCTED.json"},
	"searxng":           {"searxng/docs-shape-search.CONSTRUCTED.json"},
	"serper":            {"serper/docs-shape-search.CONSTRUCTED.json"},
	"tavily":            {"tavily/pydantic-test_basic_search.response.json"},
}

// Report is one engine's contract check.
type Report struct {
	Engine string `json:"engine"`
	Kind   string `json:"kind"`
	// Reachable: the provider answered (any status).
	Reachable bool `json:"reachable"`
	// KeyAccepted: no answer was 401 or 403.
	KeyAccepted bool `json:"key_accepted"`
	// Parsed: the engine's codec read the answer.
	Parsed bool `json:"parsed"`
	// Hits is how many hits the search returned.
	Hits int `json:"hits"`
	// Missing are fields of the documented shape the answer lacked; Unknown are
	// fields the answer had that the documented shape does not (paths like
	// "results[].title").
	Missing []string `json:"missing,omitempty"`
	Unknown []string `json:"unknown,omitempty"`
	// Deprecation and Sunset are the headers' values; Status is 404 or 410 when the
	// endpoint answered so.
	Deprecation string `json:"deprecation,omitempty"`
	Sunset      string `json:"sunset,omitempty"`
	Status      int    `json:"status,omitempty"`
	// Error is the search's failure, if it failed.
	Error string `json:"error,omitempty"`
}

// Failed reports whether the check found the engine unusable: unreachable, its key
// refused, its answer unread, or its endpoint gone (404/410). A Deprecation or
// Sunset header, or a changed field, is a finding, not a failure.
func (r Report) Failed() bool {
	return !r.Reachable || !r.KeyAccepted || !r.Parsed || r.Status != 0
}

// exchange is one answer the engine received.
type exchange struct {
	status int
	header http.Header
	body   []byte
}

// recorder is a transport that keeps every answer.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	got  []exchange
}

func (rc *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := rc.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	if rerr != nil {
		return nil, rerr
	}
	rc.mu.Lock()
	rc.got = append(rc.got, exchange{status: resp.StatusCode, header: resp.Header.Clone(), body: body})
	rc.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// Check runs one search of the engine cfg against its provider over hc (nil:
// http.DefaultClient) and reports on the provider's answer.
func Check(ctx context.Context, cfg engines.Config, hc *http.Client) Report {
	c, rc := recording(hc)
	return run(ctx, cfg, c, rc)
}

// recording is hc (nil: http.DefaultClient) with every answer kept.
func recording(hc *http.Client) (*http.Client, *recorder) {
	c := *cmp.Or(hc, http.DefaultClient)
	rc := &recorder{base: cmp.Or(c.Transport, http.DefaultTransport)}
	c.Transport = rc
	return &c, rc
}

// CheckOffline runs the same checks against the kind's fixtures: an engine whose
// codec no longer reads its documented shape fails here, before it meets a provider.
func CheckOffline(ctx context.Context, cfg engines.Config) Report {
	names, ok := Fixtures[cfg.Kind]
	if !ok {
		return Report{Engine: cfg.ID, Kind: cfg.Kind, Error: "no fixture for kind " + cfg.Kind}
	}
	if cfg.APIKey == "" && len(cfg.APIKeys) == 0 {
		cfg.APIKey = "offline-check"
	}
	cfg.BaseURL = cmp.Or(cfg.BaseURL, "http://offline.invalid")
	c, rc := replaying(names)
	return run(ctx, cfg, c, rc)
}

// replaying is a client answered by the fixtures names, in order, every answer kept.
func replaying(names []string) (*http.Client, *recorder) {
	rc := &recorder{base: &replay{names: names}}
	return &http.Client{Transport: rc}, rc
}

func run(ctx context.Context, cfg engines.Config, hc *http.Client, rc *recorder) Report {
	rep := Report{Engine: cfg.ID, Kind: cfg.Kind}
	reg, err := engines.FromConfig([]engines.Config{cfg}, hc)
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	eng, _ := reg.Get(cfg.ID)
	res, err := eng.Search(ctx, engines.Query{Query: "searchfleet contract check", Count: 3})
	if err == nil {
		rep.Hits = len(res.Hits)
	}
	rep.observe(rc, Fixtures[cfg.Kind], err)
	return rep
}

// observe fills in the call's outcome (err nil: the answer was read) and what the
// answers rc kept say: reachable, key accepted, retirement signals, and the fields
// missing from or new to the documented shape (fixtures, in call order).
func (rep *Report) observe(rc *recorder, names []string, err error) {
	rep.Parsed = err == nil
	if err != nil {
		rep.Error = err.Error()
	}
	rc.mu.Lock()
	got := slices.Clone(rc.got)
	rc.mu.Unlock()
	rep.Reachable = len(got) > 0
	rep.KeyAccepted = rep.Reachable
	var ok []exchange
	for _, x := range got {
		s := engines.SignalOf(x.status, x.header)
		rep.Deprecation = cmp.Or(rep.Deprecation, s.Deprecation)
		rep.Sunset = cmp.Or(rep.Sunset, s.Sunset)
		if s.Status != 0 {
			rep.Status = s.Status
		}
		if x.status == http.StatusUnauthorized || x.status == http.StatusForbidden {
			rep.KeyAccepted = false
		}
		if x.status/100 == 2 {
			ok = append(ok, x)
		}
	}
	if len(ok) > 0 && len(names) > 0 {
		for i, x := range ok {
			want := fixtures.Read(names[min(i, len(names)-1)])
			m, u := compare(want, x.body)
			rep.Missing = append(rep.Missing, m...)
			rep.Unknown = append(rep.Unknown, u...)
		}
		rep.Missing, rep.Unknown = uniq(rep.Missing), uniq(rep.Unknown)
	}
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// compare returns the field paths of want that got lacks, and those of got that
// want lacks. Both are JSON; a body that is not is compared as having no fields.
func compare(want, got []byte) (missing, unknown []string) {
	w, g := paths(want), paths(got)
	for p := range w {
		if !g[p] {
			missing = append(missing, p)
		}
	}
	for p := range g {
		if !w[p] {
			unknown = append(unknown, p)
		}
	}
	return uniq(missing), uniq(unknown)
}

// paths are the object field paths of a JSON document, arrays written "[]" (the
// elements' fields merged), to three levels of objects below the top.
func paths(b []byte) map[string]bool {
	var v any
	out := map[string]bool{}
	if json.Unmarshal(b, &v) != nil {
		return out
	}
	var walk func(v any, prefix string, depth int)
	walk = func(v any, prefix string, depth int) {
		switch t := v.(type) {
		case map[string]any:
			if depth > 3 {
				return
			}
			for k, c := range t {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				out[p] = true
				walk(c, p, depth+1)
			}
		case []any:
			for _, c := range t {
				walk(c, prefix+"[]", depth)
			}
		}
	}
	walk(v, "", 0)
	return out
}

// replay answers the calls of one search with the fixtures names, in order, the last
// again once they run out.
type replay struct {
	mu    sync.Mutex
	names []string
	n     int
}

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	b := fixtures.Read(r.names[min(r.n, len(r.names)-1)])
	r.n++
	r.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b)), Request: req}, nil
}

// Summary is one line for people: the engine, and what the check found.
func (r Report) Summary() string {
	var parts []string
	mark := func(ok bool, yes, no string) {
		if ok {
			parts = append(parts, yes)
		} else {
			parts = append(parts, no)
		}
	}
	mark(r.Reachable, "reachable", "UNREACHABLE")
	if r.Reachable {
		mark(r.KeyAccepted, "key accepted", "KEY REFUSED")
		parsed := fmt.Sprintf("parsed (%d hits)", r.Hits)
		if strings.HasPrefix(r.Kind, "model:") {
			parsed = "parsed"
		}
		mark(r.Parsed, parsed, "NOT PARSED")
	}
	if r.Status != 0 {
		parts = append(parts, fmt.Sprintf("ENDPOINT GONE (HTTP %d)", r.Status))
	}
	if r.Deprecation != "" {
		parts = append(parts, "Deprecation: "+r.Deprecation)
	}
	if r.Sunset != "" {
		parts = append(parts, "Sunset: "+r.Sunset)
	}
	if len(r.Missing) > 0 {
		parts = append(parts, "missing fields: "+strings.Join(r.Missing, ", "))
	}
	if len(r.Unknown) > 0 {
		parts = append(parts, "unknown fields: "+strings.Join(r.Unknown, ", "))
	}
	if r.Error != "" && !r.Parsed {
		parts = append(parts, "error: "+r.Error)
	}
	return fmt.Sprintf("%s (%s): %s", r.Engine, r.Kind, strings.Join(parts, "; "))
}
