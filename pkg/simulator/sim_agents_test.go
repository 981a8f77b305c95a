package simulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// agentPost sends body to the simulator and returns the status and the decoded answer.
func agentPost(t *testing.T, url, body string, hdr map[string]string) (int, any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v any
	if len(b) > 0 && json.Unmarshal(b, &v) != nil {
		t.Fatalf("%s answered non-JSON %q", url, b)
	}
	return resp.StatusCode, v
}

// TestSimulatedAgentsRefuseWhatTheProvidersRefuse: the requests each provider's docs
// say it refuses are refused in its error shape, and nothing is counted as submitted.
func TestSimulatedAgentsRefuseWhatTheProvidersRefuse(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	hs := httptest.NewServer(sim)
	defer hs.Close()
	for _, tc := range []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		shape            string // a JSON path the error has
	}{
		{"openai needs a data source", "/openai-deep-research/v1/responses", `{"model":"o3-deep-research","input":"q","background":true}`, nil, 400, "error.message"},
		{"openai deep research runs in background", "/openai-deep-research/v1/responses", `{"model":"o3-deep-research","input":"q","tools":[{"type":"web_search_preview"}]}`, nil, 400, "error.message"},
		{"gemini needs background", "/gemini-deep-research/v1beta/interactions", `{"agent":"deep-research-preview-04-2026","input":"q"}`, nil, 400, "0.error.status"},
		{"gemini background needs store", "/gemini-deep-research/v1beta/interactions", `{"agent":"deep-research-preview-04-2026","input":"q","background":true,"store":false}`, nil, 400, "0.error.status"},
		{"gemini chains to a known interaction", "/gemini-deep-research/v1beta/interactions", `{"agent":"deep-research-preview-04-2026","input":"ok","background":true,"previous_interaction_id":"v1_nope"}`, nil, 404, "0.error.status"},
		{"perplexity needs an engine", "/perplexity-agent/v1/agent", `{"input":"q","background":true}`, nil, 400, "error.message"},
		{"parallel webhooks need the beta header", "/parallel-task/v1/tasks/runs", `{"input":"q","processor":"core","webhook":{"url":"http://127.0.0.1:1/h","event_types":["task_run.status"]}}`, nil, 422, "error.message"},
		{"parallel metadata keys are short", "/parallel-task/v1/tasks/runs", `{"input":"q","processor":"core","metadata":{"a_key_longer_than_16":"x"}}`, nil, 422, "error.message"},
		{"parallel adds runs to a known task group", "/parallel-task/v1/tasks/groups/tgrp_nope/runs", `{"inputs":[{"input":"q","processor":"core"}]}`, nil, 404, "error.message"},
		{"exa agent needs its beta header", "/exa-agent/agent/runs", `{"query":"q"}`, nil, 400, "error.code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, v := agentPost(t, hs.URL+tc.path, tc.body, tc.hdr)
			if status != tc.status || !has(v, tc.shape) {
				t.Fatalf("%d %v, want %d with %s", status, v, tc.status, tc.shape)
			}
		})
	}
	if n := len(sim.Stats().AgentSubmissions); n != 0 {
		t.Errorf("%d refused submissions counted", n)
	}
}

// has reports whether v has the dotted path (array indexes as numbers).
func has(v any, path string) bool {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			if p != "0" || len(x) == 0 {
				return false
			}
			v = x[0]
		default:
			return false
		}
	}
	return v != nil
}

// TestSimulatedAgentsOverHTTPControls: the clock and the counts are reachable over
// HTTP (for a fleet run in another process), a synchronous Perplexity call answers at
// once, and Reset forgets the runs.
func TestSimulatedAgentsOverHTTPControls(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	hs := httptest.NewServer(sim)
	defer hs.Close()
	status, v := agentPost(t, hs.URL+"/exa-agent/agent/runs", `{"query":"q","metadata":{"fleet_ref":"rr_x"}}`, map[string]string{"Exa-Beta": "agent-2026-05-07"})
	if status != 200 || v.(map[string]any)["status"] != "queued" {
		t.Fatalf("%d %v", status, v)
	}
	id := v.(map[string]any)["id"].(string)
	if status, _ := agentPost(t, hs.URL+"/_sim/agents/clock", `{"advance":"1h"}`, nil); status != http.StatusNoContent {
		t.Fatalf("clock: %d", status)
	}
	resp, err := http.Get(hs.URL + "/exa-agent/agent/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	var run map[string]any
	json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	if run["status"] != "completed" {
		t.Fatalf("after an hour: %v", run["status"])
	}
	resp, _ = http.Get(hs.URL + "/_sim/stats")
	var stats simulator.Stats
	json.NewDecoder(resp.Body).Decode(&stats)
	resp.Body.Close()
	if stats.AgentSubmissions["exa-agent|rr_x"] != 1 {
		t.Errorf("stats %v", stats.AgentSubmissions)
	}

	status, v = agentPost(t, hs.URL+"/perplexity-agent/v1/agent", `{"preset":"low","input":"q"}`, nil)
	if status != 200 || v.(map[string]any)["status"] != "completed" {
		t.Errorf("a synchronous Agent API call: %d %v", status, v)
	}

	sim.Reset()
	resp, _ = http.Get(hs.URL + "/exa-agent/agent/runs/" + id)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || sim.AgentSubmissions("exa-agent", "rr_x") != 0 {
		t.Errorf("after Reset the run is still there (%d)", resp.StatusCode)
	}
}
