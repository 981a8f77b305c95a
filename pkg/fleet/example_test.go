package fleet_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// config/example.json, as shipped, runs a fleet with nothing set but the provider
// keys, and the base URLs the environment gives (here: all pointed at the simulator,
// so no request leaves the machine): a question that needs the web is answered
// through the example's default engine, and a direct search reaches an engine whose
// URL came from FLEET_ENGINE_<ID>_BASE_URL.
func TestExampleConfigRuns(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "example.json"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := config.ParseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	environ := map[string]string{
		"FLEET_PROVIDER_OPENAI_BASE_URL": simURL + "/v1", "FLEET_PROVIDER_GLM_BASE_URL": simURL + "/v1", "FLEET_PROVIDER_DEEPSEEK_BASE_URL": simURL + "/v1",
		"FLEET_PROVIDER_GLM_SEARCH_BASE_URL": simURL + "/glm-chat", "FLEET_PROVIDER_GEMINI_SEARCH_BASE_URL": simURL + "/gemini",
		"FLEET_ENGINE_BRAVE_BASE_URL": simURL + "/brave", "FLEET_ENGINE_SEARXNG_BASE_URL": simURL + "/searxng",
	}
	for _, p := range file.Providers {
		environ[p.APIKeyEnv] = "sim-key"
	}
	if err := file.Resolve(config.MapLookup(environ)); err != nil {
		t.Fatal(err)
	}
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = bustest.Server(t), prefix
	apiAddr, _ := role(t, fleet.Roles{Ingress: true, Chat: true, Search: true}, env, file, rdb)

	post := func(path string, body any) (int, []byte) {
		j, _ := json.Marshal(body)
		resp, err := http.Post("http://"+apiAddr+path, "application/json", bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	status, out := post("/v1/chat/completions", map[string]any{"model": "glm-4.7",
		"messages": []any{map[string]any{"role": "user", "content": "Search the web: who won the 2022 world cup?"}}})
	if status != 200 || !strings.Contains(string(out), "[1]") || !strings.Contains(string(out), searchQuote) {
		t.Fatalf("chat through the example config: %d %s", status, out)
	}
	status, out = post("/v1/search", map[string]any{"query": "go generics", "engine": "brave", "count": 3})
	if status != 200 || !strings.Contains(string(out), "https://") {
		t.Fatalf("direct search on brave: %d %s", status, out)
	}
	// Every request went to the simulator: the model, the example's default engine
	// (glm, through its provider's overridden search URL) and brave.
	st := sim.Stats().Requests
	if st["model"] == 0 || st["glm-chat"] == 0 || st["brave"] == 0 {
		t.Errorf("simulator requests %v", st)
	}
}
