package fleet_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// A model that cites a source the job never retrieved ("sim:bad-cite" adds [97]) never
// gets that citation to the client: not in any protocol, streamed or not. The valid
// citations stay, and the job record counts the removed one.
func TestBadCitationNeverReachesTheClient(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	const ask = "Search the web for the latest news about NATS JetStream sim:bad-cite"
	msgs := []any{map[string]any{"role": "user", "content": ask}}
	for _, c := range []struct {
		name, path string
		body       map[string]any
	}{
		{"chat", "/v1/chat/completions", map[string]any{"model": demo.Model, "messages": msgs}},
		{"chat stream", "/v1/chat/completions", map[string]any{"model": demo.Model, "messages": msgs, "stream": true}},
		{"responses", "/v1/responses", map[string]any{"model": demo.Model, "input": ask}},
		{"responses stream", "/v1/responses", map[string]any{"model": demo.Model, "input": ask, "stream": true}},
		{"messages", "/v1/messages", map[string]any{"model": demo.Model, "max_tokens": 1024, "messages": msgs}},
		{"messages stream", "/v1/messages", map[string]any{"model": demo.Model, "max_tokens": 1024, "messages": msgs, "stream": true}},
	} {
		b, _ := json.Marshal(c.body)
		req, _ := http.NewRequest("POST", f.URL+c.path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body.String())
		}
		if strings.Contains(body.String(), "[97]") {
			t.Errorf("%s: the answer cites [97], a source the job never retrieved:\n%s", c.name, body.String())
		}
		if !strings.Contains(body.String(), "[1]") {
			t.Errorf("%s: the answer lost its valid citations:\n%s", c.name, body.String())
		}
		jobID := resp.Header.Get("X-Searchfleet-Job-Id")
		_, jb, _ := f.Do(t, "GET", "/v1/jobs/"+jobID, nil)
		var job struct {
			Usage struct {
				Citations struct{ Cited, Valid, Removed int } `json:"citations"`
			} `json:"usage"`
		}
		json.Unmarshal(jb, &job)
		if u := job.Usage.Citations; u.Removed != 1 || u.Valid < 1 || u.Cited != u.Valid+u.Removed {
			t.Errorf("%s: job %s citations %+v, want one removed", c.name, jobID, u)
		}
	}
}
