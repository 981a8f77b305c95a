package fleet_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// Every main-model call is watched for retirement signals: a Sunset header is
// counted on each answer and logged once a day for its provider; a 410 is counted
// and fails the call.
func TestModelCallsWatchedForDeprecation(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	sim.SetHeaderFault("/v1/chat", map[string]string{"Sunset": "Sat, 27 Sep 2026 00:00:00 GMT"}, 0)
	sim.SetFault("/v1/messages", 410, 0, 0)
	f := &config.File{
		Providers: map[string]config.Provider{
			"chatp":   {Kind: "openai", BaseURL: srv.URL + "/v1", APIKey: "k"},
			"claudep": {Kind: "anthropic", Protocol: "anthropic-messages", BaseURL: srv.URL, APIKey: "k"},
		},
		Models: map[string]config.ModelRoute{"chat": {Provider: "chatp", Model: "sim-scripted"}, "claude": {Provider: "claudep", Model: "sim-scripted"}},
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var logs bytes.Buffer
	models, err := fleet.ModelsWith(f, srv.Client(), fleet.ModelOptions{Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Deprecation: func(provider, signal string) { mu.Lock(); counts[provider+" "+signal]++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	req := &wire.Request{Model: "sim-scripted", MaxTokens: 50, Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "Say hello."}}}}}
	call := func(name string) error {
		c := models[name].Client
		p, err := c.Prepare(req, false)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Complete(context.Background(), p, nil)
		return err
	}
	for range 2 {
		if err := call("chat"); err != nil {
			t.Fatal(err)
		}
	}
	if err := call("claude"); err == nil {
		t.Error("a 410 answer succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if counts["chatp sunset"] != 2 || counts["claudep 410"] != 1 {
		t.Errorf("counts = %v, want 2 sunset for chatp and one 410 for claudep", counts)
	}
	if n := strings.Count(logs.String(), "deprecated or gone"); n != 2 {
		t.Errorf("%d warnings logged, want one per provider:\n%s", n, logs.String())
	}
}
