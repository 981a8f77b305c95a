package e2e_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
)

// A chat worker killed while the searches of jobs on the Responses, Claude and
// Gemini brains are out leaves them to the next worker: each ends cited, in its
// protocol, and no model call or search is paid twice.
func TestModelProtocolsSurviveWorkerKill(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startIngress()
	c.start("searchworker", "searchworker", "FLEET_ENGINES=google")
	first := c.start("chatworker-1", "chatworker")
	models := []string{demo.ModelResponses, demo.ModelClaude, demo.ModelGemini}
	var ids []string
	for _, m := range models {
		body, _ := json.Marshal(map[string]any{"model": m, "messages": []any{map[string]any{"role": "user",
			"content": "Search the web for the latest news about NATS JetStream (" + m + ") sim:slow=2s"}}})
		resp, err := http.Post(c.url+"/v1/jobs", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			ID string `json:"id"`
		}
		json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || v.ID == "" {
			t.Fatalf("submit %s: %d", m, resp.StatusCode)
		}
		ids = append(ids, v.ID)
	}
	c.eventually("the searches running", func() bool { return c.sim.Stats().Requests["gemini"] == 3 })
	first.kill()
	c.start("chatworker-2", "chatworker")
	for i, id := range ids {
		j := c.waitDone(id)
		var usage map[string]any
		json.Unmarshal(j.Usage, &usage)
		if got := answer(t, j); !strings.Contains(got, "[1]") || usage["model_calls"] != 2.0 {
			t.Errorf("%s: answer %q, usage %s", models[i], got, j.Usage)
		}
	}
	st := c.sim.Stats()
	if st.Requests["model"] != 6 || st.Requests["gemini"] != 3 || st.Duplicates["model"] != 0 || st.Duplicates["gemini"] != 0 {
		t.Fatalf("simulator saw %v, duplicates %v; want 6 model calls and 3 searches, none repeated", st.Requests, st.Duplicates)
	}
}
