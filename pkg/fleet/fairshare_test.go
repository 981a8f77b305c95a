package fleet_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// Fair shares on a whole fleet (embedded NATS, real Redis, the simulator): a tenant
// whose jobs hold their slots for long (a slow model call, a slow search) cannot make
// another tenant's request wait for them. Every assertion counts: the other tenant is
// answered while none of the flood's jobs has ended.

func fairFleet(t *testing.T, env func(*config.Env)) (*fleettest.Fleet, batchClient, batchClient) {
	f := fleettest.Start(t, fleettest.Env(env), fleettest.File(func(c *config.File) {
		c.Tenants = []config.Tenant{{ID: "flood", APIKeyEnv: "FAIRTEST_KEY_FLOOD", APIKeys: []string{"key-flood"}},
			{ID: "ivy", APIKeyEnv: "FAIRTEST_KEY_IVY", APIKeys: []string{"key-ivy"}}}
	}))
	return f, batchClient{t: t, url: f.URL, key: "key-flood"}, batchClient{t: t, url: f.URL, key: "key-ivy"}
}

// flood submits n async jobs asking text and returns their ids.
func flood(t *testing.T, c batchClient, n int, text string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		status, body := c.do("POST", "/v1/jobs", map[string]any{"model": demo.Model,
			"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf(text, i)}}})
		if status != http.StatusAccepted {
			t.Fatalf("flood job %d: %d %s", i, status, body)
		}
		var j struct {
			ID string `json:"id"`
		}
		json.Unmarshal(body, &j)
		ids[i] = j.ID
	}
	return ids
}

func endedJobs(t *testing.T, c batchClient, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		_, body := c.do("GET", "/v1/jobs/"+id, nil)
		var j struct {
			Status string `json:"status"`
		}
		json.Unmarshal(body, &j)
		if j.Status == "completed" || j.Status == "failed" || j.Status == "cancelled" {
			n++
		}
	}
	return n
}

func ivyChat(t *testing.T, c batchClient, text string) string {
	t.Helper()
	status, body := c.do("POST", "/v1/chat/completions", map[string]any{"model": demo.Model,
		"messages": []any{map[string]any{"role": "user", "content": text}}})
	if status != http.StatusOK {
		t.Fatalf("ivy's chat: %d %s", status, body)
	}
	var m map[string]any
	json.Unmarshal(body, &m)
	return fleettest.Content(m)
}

// A tenant whose 20 jobs each hold a chat step for a slow model call holds its share
// of a chat worker's 8 steps; another tenant's request takes a step left free and is
// answered while every one of the flood's jobs still runs or waits.
func TestFloodingTenantLeavesChatStepsToAnother(t *testing.T) {
	t.Parallel()
	f, a, b := fairFleet(t, func(e *config.Env) { e.ChatConcurrency = 8 })
	ids := flood(t, a, 20, "Write a long poem, number %d. sim:nosearch sim:model-slow=15s")
	fleettest.Eventually(t, "the flood to hold its steps", func() bool { return f.Sim.Stats().Requests["model"] >= 7 })
	if got := ivyChat(t, b, "Say hello. sim:nosearch"); got == "" {
		t.Fatal("ivy's answer is empty")
	}
	if n := endedJobs(t, a, ids); n != 0 {
		t.Fatalf("%d of the flood's jobs ended before ivy was answered: ivy waited for them", n)
	}
	if n := f.Sim.Stats().Requests["model"]; n > 8 {
		t.Fatalf("%d model calls: the flood held more than its steps (7 of 8) while ivy was served", n)
	}
}

// A tenant whose jobs each wait on a slow search holds its share of one engine's 4
// search slots; another tenant's searching chat on the same engine is answered, cited,
// while every one of the flood's jobs still waits for its search.
func TestFloodingTenantLeavesSearchSlotsToAnother(t *testing.T) {
	t.Parallel()
	f, a, b := fairFleet(t, func(e *config.Env) { e.SearchConcurrency = 4 })
	ids := flood(t, a, 12, "Search the web: weather in city %d? sim:engine=brave sim:slow=15s")
	fleettest.Eventually(t, "the flood to hold its search slots", func() bool { return f.Sim.Stats().Requests["brave"] >= 3 })
	if got := ivyChat(t, b, "Search the web: weather in Paris today? sim:engine=brave"); !strings.Contains(got, "[1]") {
		t.Fatalf("ivy's answer does not cite: %q", got)
	}
	if n := endedJobs(t, a, ids); n != 0 {
		t.Fatalf("%d of the flood's jobs ended before ivy was answered: ivy waited for them", n)
	}
	if n := f.Sim.Stats().Requests["brave"]; n > 4 {
		t.Fatalf("%d brave searches: the flood held more than its slots (3 of 4) while ivy was served", n)
	}
}
