package simulator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

var classicKeySeq atomic.Int64

// classicEngines stands up a simulator and returns the four classic kinds configured
// against it by EngineConfigs, each with a key variable of its own (so parallel tests
// need not share SIM_API_KEY).
func classicEngines(t *testing.T) (*simulator.Server, map[string]engines.Engine) {
	t.Helper()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	env := fmt.Sprintf("SIM_CLASSIC_TEST_KEY_%d", classicKeySeq.Add(1))
	os.Setenv(env, "sim-test-key")
	t.Cleanup(func() { os.Unsetenv(env) })
	want := map[string]bool{"brave": true, "searxng": true, "exa": true, "serper": true}
	var cfgs []engines.Config
	for _, c := range sim.EngineConfigs(srv.URL) {
		if want[c.Kind] {
			c.APIKeyEnv = env
			cfgs = append(cfgs, c)
			delete(want, c.Kind)
		}
	}
	if len(want) != 0 {
		t.Fatalf("EngineConfigs has no config for %v", want)
	}
	reg, err := engines.FromConfig(cfgs, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]engines.Engine{}
	for _, id := range reg.IDs() {
		out[id], _ = reg.Get(id)
	}
	return sim, out
}

func TestClassicSimulatorRoutes(t *testing.T) {
	t.Parallel()
	sim, engs := classicEngines(t)
	firstURL := map[string]string{
		"brave":   "https://go.dev/doc/tutorial/generics",
		"searxng": "https://tokio.rs/",
		"exa":     "https://arxiv.org/abs/2307.06435",
		"serper":  "https://www.google.com/finance/quote/AAPL:NASDAQ",
	}
	for kind, eng := range engs {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			res, err := eng.Search(ctx, engines.Query{Query: "tide tables of Brest", Count: 4})
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			if len(res.Hits) != 4 || !strings.Contains(res.Hits[0].Title+res.Hits[0].Snippet, "tide tables of Brest") ||
				!strings.HasSuffix(res.Hits[0].URL, "/tide-tables-of-brest") || res.Engine != kind {
				t.Errorf("result: engine %q, %d hits, first %+v", res.Engine, len(res.Hits), res.Hits)
			}
			// The recorded fixture itself, when a test asks for it.
			res, err = eng.Search(ctx, engines.Query{Query: "simulated search sim:fixture", Count: 5})
			if err != nil || len(res.Hits) != 5 || res.Hits[0].URL != firstURL[kind] {
				t.Errorf("sim:fixture: %v, %+v", err, res)
			}

			_, err = eng.Search(ctx, engines.Query{Query: "busy sim:429"})
			e := classicWantKind(t, err, engines.RateLimited)
			if e.RetryAfter != time.Second || e.Status != 429 {
				t.Errorf("429: %+v", e)
			}

			_, err = eng.Search(ctx, engines.Query{Query: "broken sim:500"})
			classicWantKind(t, err, engines.Unavailable)

			res, err = eng.Search(ctx, engines.Query{Query: "nothing sim:empty"})
			if err != nil || len(res.Hits) != 0 {
				t.Errorf("sim:empty: %v, %+v", err, res)
			}
		})
	}
	st := sim.Stats()
	for kind := range engs {
		if st.Requests[kind] != 5 {
			t.Errorf("requests[%s] = %d, want 5", kind, st.Requests[kind])
		}
	}
}

// Credentials and quota failures come back in each provider's envelope and classify as
// the real ones do; SearXNG's 403 is its refusal of format=json.
func TestClassicSimulatorErrorEnvelopes(t *testing.T) {
	t.Parallel()
	_, engs := classicEngines(t)
	for _, tc := range []struct {
		kind, directive string
		want            engines.ErrorKind
	}{
		{"brave", "sim:401", engines.Auth},
		{"brave", "sim:403", engines.Auth},
		{"exa", "sim:401", engines.Auth},
		{"serper", "sim:403", engines.Auth},
		{"searxng", "sim:401", engines.Auth},
		{"searxng", "sim:403", engines.BadRequest},
		{"exa", "sim:503", engines.Unavailable},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := engs[tc.kind].Search(ctx, engines.Query{Query: "q " + tc.directive})
		cancel()
		e := classicWantKind(t, err, tc.want)
		if e.Message == "" {
			t.Errorf("%s %s: empty message", tc.kind, tc.directive)
		}
	}
}

func classicWantKind(t *testing.T, err error, kind engines.ErrorKind) *engines.Error {
	t.Helper()
	var e *engines.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *engines.Error", err, err)
	}
	if e.Kind != kind {
		t.Fatalf("error kind = %s, want %s (%v)", e.Kind, kind, err)
	}
	return e
}
