package simulator_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// The Perplexity Agent and Search APIs and the low-cost search APIs answer at their
// documented paths, in their documented shapes, through the engines EngineConfigs
// configures: generated pages, the fixture itself, an empty answer and each
// provider's error envelope.
func TestLowCostSimulatorRoutes(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	want := map[string]string{
		"perplexity":        "https://www.accuweather.com/en/us/san-francisco/94103/weather-forecast/347629",
		"perplexity-search": "https://en.wikipedia.org/wiki/Large_language_model",
		"cloudflare":        "https://www.visitsaltlake.com/things-to-do/fall/",
		"parallel":          "https://en.wikipedia.org/wiki/Solid-state_battery",
		"linkup":            "https://www.nobelprize.org/prizes/physics/2023/summary/",
	}
	var cfgs []engines.Config
	for _, c := range sim.EngineConfigs(srv.URL) {
		if _, ok := want[c.Kind]; ok {
			cfgs = append(cfgs, c)
		}
	}
	if len(cfgs) != len(want) {
		t.Fatalf("EngineConfigs has %d of the %d kinds", len(cfgs), len(want))
	}
	reg, err := engines.FromConfig(cfgs, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	for kind, first := range want {
		eng, _ := reg.Get(kind)
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := eng.Search(ctx, engines.Query{Query: "tide tables of Brest", Count: 3})
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			if len(res.Hits) != 3 || !strings.HasSuffix(res.Hits[0].URL, "/tide-tables-of-brest") || res.Usage.CostUSD <= 0 {
				t.Errorf("result: %d hits, first %+v, usage %+v", len(res.Hits), res.Hits, res.Usage)
			}
			res, err = eng.Search(ctx, engines.Query{Query: "simulated search sim:fixture"})
			if err != nil || len(res.Hits) == 0 || res.Hits[0].URL != first {
				t.Errorf("sim:fixture: %v, %+v", err, res)
			}
			res, err = eng.Search(ctx, engines.Query{Query: "nothing sim:empty"})
			if err != nil || len(res.Hits) != 0 {
				t.Errorf("sim:empty: %v, %+v", err, res)
			}
			_, err = eng.Search(ctx, engines.Query{Query: "busy sim:429"})
			classicWantKind(t, err, engines.RateLimited)
			_, err = eng.Search(ctx, engines.Query{Query: "who sim:401"})
			classicWantKind(t, err, engines.Auth)
		})
	}
}
