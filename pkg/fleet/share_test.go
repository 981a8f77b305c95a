package fleet_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/ingress"
)

// A job posted with X-Searchfleet-Share: in-flight while an identical one runs is
// that job: the same id, marked shared, and no second model call; without the
// header, or once the first has ended, an identical request is a job of its own.
func TestIdenticalJobInFlightIsShared(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	body, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{user("Say hello, slowly. sim:model-slow=1500ms")}})
	post := func(share bool) (string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("POST", f.URL+"/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if share {
			req.Header.Set(ingress.HeaderShare, "in-flight")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			ID string `json:"id"`
		}
		json.NewDecoder(resp.Body).Decode(&v)
		if resp.StatusCode != http.StatusAccepted || v.ID == "" {
			t.Fatalf("POST /v1/jobs: %d", resp.StatusCode)
		}
		return v.ID, resp.Header
	}
	done := func(id string) {
		t.Helper()
		fleettest.Eventually(t, "job "+id+" to complete", func() bool {
			j, err := f.Store.Jobs.GetJob(t.Context(), id)
			return err == nil && j.Status == "completed"
		})
	}
	first, h := post(true)
	if h.Get(ingress.HeaderShared) != "" {
		t.Fatalf("the first job is marked shared")
	}
	second, h := post(true)
	if second != first || h.Get(ingress.HeaderShared) != "true" {
		t.Fatalf("identical job in flight: id %s (first %s), %s %q", second, first, ingress.HeaderShared, h.Get(ingress.HeaderShared))
	}
	unshared, _ := post(false)
	if unshared == first {
		t.Fatalf("a request without %s shared the job in flight", ingress.HeaderShare)
	}
	done(first)
	later, h := post(true)
	if later == first || h.Get(ingress.HeaderShared) != "" {
		t.Fatalf("a request after the first job ended shared it (%s)", later)
	}
	done(unshared)
	done(later)
	if n := f.Sim.Stats().Requests["model"]; n != 3 {
		t.Errorf("model called %d times, want 3 (the shared job once)", n)
	}
}
