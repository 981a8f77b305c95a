package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// Offline, every engine kind passes the contract check on its fixtures.
func TestEnginesCheckOffline(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"engines", "check", "--offline"}, &out, &errb); err != nil {
		t.Fatalf("engines check --offline: %v\n%s%s", err, out.String(), errb.String())
	}
	if n := strings.Count(out.String(), "reachable; key accepted; parsed"); n < len(engines.Kinds())+len(upstream.ModelProtocols) {
		t.Errorf("%d engines and models passed, want every kind and protocol:\n%s", n, out.String())
	}
}

// Against the simulator set to answer 410 on one engine's endpoint and one model's,
// and to add a Sunset header on another engine's and another model's, the check
// reports all four and fails for the two 410s.
func TestEnginesCheckFindsRetirement(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	sim.SetFault("/brave", 410, 0, 0)
	sim.SetHeaderFault("/tavily", map[string]string{"Sunset": "Sat, 27 Sep 2026 00:00:00 GMT"}, 0)
	sim.SetFault("/v1beta/models", 410, 0, 0) // the Gemini models
	sim.SetHeaderFault("/v1/messages", map[string]string{"Sunset": "Sat, 27 Sep 2026 00:00:00 GMT"}, 0)
	b, err := json.Marshal(demo.Config(srv.URL, sim.EngineConfigs(srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(demo.KeyEnv, "sim-key")
	var out, errb bytes.Buffer
	err = run(t.Context(), []string{"engines", "check", "--config", path}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "3 of") {
		t.Errorf("err = %v, want one engine and two models (of the Gemini provider) failed", err)
	}
	var brave, tavily, gemini, claude string
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "brave "):
			brave = l
		case strings.HasPrefix(l, "tavily "):
			tavily = l
		case strings.HasPrefix(l, demo.ModelGemini+" "):
			gemini = l
		case strings.HasPrefix(l, demo.ModelClaude+" "):
			claude = l
		}
	}
	if !strings.Contains(gemini, "ENDPOINT GONE (HTTP 410)") {
		t.Errorf("model %s: %q, want the 410 reported", demo.ModelGemini, gemini)
	}
	if !strings.Contains(claude, "Sunset: Sat, 27 Sep 2026") || !strings.Contains(claude, "parsed") {
		t.Errorf("model %s: %q, want the Sunset header reported on a parsed answer", demo.ModelClaude, claude)
	}
	if !strings.Contains(brave, "ENDPOINT GONE (HTTP 410)") {
		t.Errorf("brave: %q, want the 410 reported", brave)
	}
	if !strings.Contains(tavily, "Sunset: Sat, 27 Sep 2026") || !strings.Contains(tavily, "parsed") {
		t.Errorf("tavily: %q, want the Sunset header reported on a parsed answer", tavily)
	}
}
