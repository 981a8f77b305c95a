package fleet_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

func postJob(t *testing.T, f *fleettest.Fleet, key string, body []byte) (int, map[string]any, http.Header) {
	req, _ := http.NewRequest("POST", f.URL+"/v1/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v, resp.Header
}

// The same Idempotency-Key posted 50 times at once creates one job, which runs once;
// the same key with a different body is refused.
func TestIdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	body, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{user("Search the web for the news, once")}})
	var wg sync.WaitGroup
	ids := make([]string, 50)
	replayed := 0
	var mu sync.Mutex
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, v, h := postJob(t, f, "order-42", body)
			if status != http.StatusAccepted {
				t.Errorf("status %d: %v", status, v)
				return
			}
			ids[i], _ = v["id"].(string)
			if h.Get("Idempotent-Replayed") == "true" {
				mu.Lock()
				replayed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("jobs: %v", ids)
		}
	}
	if replayed != 49 {
		t.Errorf("%d answers marked replayed, want 49", replayed)
	}
	fleettest.Eventually(t, "the job to complete", func() bool {
		j, err := f.Store.Jobs.GetJob(t.Context(), ids[0])
		return err == nil && j.Status == "completed"
	})
	if n := f.Sim.Stats().Requests["model"]; n != 2 {
		t.Errorf("model called %d times for one job", n)
	}
	other, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{user("a different question")}})
	if status, v, _ := postJob(t, f, "order-42", other); status != http.StatusConflict {
		t.Errorf("same key, different body: %d %v", status, v)
	}
}
