package simulator_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// A standing fault with a key fails only the requests carrying that key, whichever
// header or parameter the kind sends it in: an engine given the faulted key alone
// fails, and one given it with a second key rotates past it and succeeds.
func TestKeyFaultFailsOneKeyOfEveryKind(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	for _, c := range sim.EngineConfigs(srv.URL) {
		if c.Kind == "searxng" {
			continue // sends no key
		}
		t.Run(c.Kind, func(t *testing.T) {
			bad, good := "bad-"+c.Kind, "good-"+c.Kind
			sim.SetKeyFault("/"+c.Kind, bad, 401, 0, 0)
			q := engines.Query{Query: "latest news about NATS JetStream"}

			alone := c
			alone.APIKey = bad
			reg, err := engines.FromConfig([]engines.Config{alone}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			eng, _ := reg.Get(c.ID)
			_, err = eng.Search(context.Background(), q)
			var e *engines.Error
			if !errors.As(err, &e) || e.Kind != engines.Auth {
				t.Fatalf("the faulted key alone: %v, want an auth error", err)
			}

			both := c
			both.APIKeys = []string{bad, good}
			if reg, err = engines.FromConfig([]engines.Config{both}, srv.Client()); err != nil {
				t.Fatal(err)
			}
			eng, _ = reg.Get(c.ID)
			for range 2 {
				if _, err := eng.Search(context.Background(), q); err != nil {
					t.Fatalf("with a second key: %v", err)
				}
			}
		})
	}
}
