package fleet_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// When the model leaves the engine to the fleet, a Chinese query goes to an engine
// declared for Chinese (the demo's glm) and an English one to the default (google);
// the trace records the choice.
func TestLanguageAwareEngineChoice(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, c := range []struct{ text, engine, choice string }{
		{"帮我搜一下北京今天的新闻 sim:search", "glm", "language:zh"},
		{"Search the web for the latest news about NATS sim:search", "google", "default"},
	} {
		status, body, _ := f.Do(t, "POST", "/v1/jobs", map[string]any{"model": "sim-model", "messages": []any{map[string]any{"role": "user", "content": c.text}}})
		if status != http.StatusAccepted {
			t.Fatalf("status %d: %s", status, body)
		}
		var job struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Trace  []struct {
				Engine       string `json:"engine"`
				EngineChoice string `json:"engine_choice"`
			} `json:"trace"`
		}
		json.Unmarshal(body, &job)
		id := job.ID
		fleettest.Eventually(t, "job "+id+" completed", func() bool {
			_, b, _ := f.Do(t, "GET", "/v1/jobs/"+id, nil)
			json.Unmarshal(b, &job)
			return job.Status == "completed"
		})
		if len(job.Trace) != 1 || job.Trace[0].Engine != c.engine || job.Trace[0].EngineChoice != c.choice {
			t.Errorf("%q: trace %+v, want one search on %s (%s)", c.text, job.Trace, c.engine, c.choice)
		}
	}
}
