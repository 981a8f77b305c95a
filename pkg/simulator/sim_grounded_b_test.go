package simulator_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// groundedBKeyEnv is this file's own key variable, so no other test's environment
// changes can reach these engines.
const groundedBKeyEnv = "SIM_GROUNDED_B_TEST_KEY"

// Each grounded-B kind, configured by the simulator's own EngineConfigs, searches
// against the simulator: it gets sources, "sim:429" is a retryable rate limit with
// the simulator's Retry-After, and "sim:empty" is an empty result, not an error.
func TestGroundedBSimulator(t *testing.T) {
	t.Parallel()
	os.Setenv(groundedBKeyEnv, "sk-sim-grounded-b")
	for _, tc := range []struct {
		kind     string
		requests int64 // provider calls per search
	}{
		{"glm-chat", 1}, {"glm-api", 1}, {"kimi", 2}, {"perplexity", 1}, {"openrouter", 1},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			sim := simulator.New(simulator.Options{})
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			var cfg *engines.Config
			for _, c := range sim.EngineConfigs(srv.URL) {
				if c.Kind == tc.kind {
					cfg = &c
				}
			}
			if cfg == nil {
				t.Fatalf("simulator has no %s engine", tc.kind)
			}
			if cfg.BaseURL != srv.URL+"/"+tc.kind {
				t.Errorf("BaseURL = %q", cfg.BaseURL)
			}
			cfg.APIKeyEnv = groundedBKeyEnv
			reg, err := engines.FromConfig([]engines.Config{*cfg}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			eng, _ := reg.Get(cfg.ID)
			search := func(q string) (*engines.Result, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return eng.Search(ctx, engines.Query{Query: q})
			}

			res, err := search("what is new in web search?")
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			if len(res.Citation.Sources) == 0 || len(res.Hits) == 0 {
				t.Errorf("sources = %d, hits = %d, want some", len(res.Citation.Sources), len(res.Hits))
			}
			for _, n := range engines.Markers(res.Citation.LLMContent) {
				if n < 1 || n > len(res.Citation.Sources) {
					t.Errorf("marker [%d] with %d sources", n, len(res.Citation.Sources))
				}
			}
			if got := sim.Stats().Requests[tc.kind]; got != tc.requests {
				t.Errorf("provider calls = %d, want %d", got, tc.requests)
			}

			_, err = search("rate limit me sim:429")
			var e *engines.Error
			if !errors.As(err, &e) || e.Kind != engines.RateLimited || e.RetryAfter != time.Second || !e.Retryable() {
				t.Errorf("sim:429: err = %v, want RateLimited after 1s", err)
			}

			res, err = search("nothing to find sim:empty")
			if err != nil || len(res.Hits) != 0 || res.Citation.Error != nil {
				t.Errorf("sim:empty: err = %v, result = %+v", err, res)
			}
		})
	}
}
