package fleet_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"testing"
	"time"

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

// Identical synchronous requests (Chat Completions and Messages) sent with
// X-Searchfleet-Share: in-flight while the first runs get the first's answer, marked
// shared, from one model call; a streamed request is answered by a call of its own.
func TestIdenticalSyncRequestInFlightIsShared(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	type answer struct {
		status int
		shared string
		body   map[string]any
	}
	post := func(path string, body map[string]any, share bool) answer {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", f.URL+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		if share {
			req.Header.Set(ingress.HeaderShare, "in-flight")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return answer{}
		}
		defer resp.Body.Close()
		a := answer{status: resp.StatusCode, shared: resp.Header.Get(ingress.HeaderShared)}
		if body["stream"] == true {
			return a
		}
		json.NewDecoder(resp.Body).Decode(&a.body)
		return a
	}
	for _, tc := range []struct {
		path string
		body map[string]any
		text func(map[string]any) any
	}{
		{"/v1/chat/completions", map[string]any{"model": demo.Model, "messages": []any{user("Share this, slowly. sim:model-slow=1500ms")}},
			func(v map[string]any) any { return v["choices"] }},
		{"/v1/messages", map[string]any{"model": demo.Model, "max_tokens": 256, "messages": []any{user("Share that, slowly. sim:model-slow=1500ms")}},
			func(v map[string]any) any { return v["content"] }},
	} {
		before := f.Sim.Stats().Requests["model"]
		answers := make(chan answer, 3)
		go func() { answers <- post(tc.path, tc.body, true) }()
		time.Sleep(300 * time.Millisecond) // the first is running
		go func() { answers <- post(tc.path, tc.body, true) }()
		streamed := maps.Clone(tc.body)
		streamed["stream"] = true
		go func() { answers <- post(tc.path, streamed, true) }()
		var got []answer
		for range 3 {
			got = append(got, <-answers)
		}
		var plain []answer
		for _, a := range got {
			if a.status != http.StatusOK {
				t.Fatalf("%s: status %d", tc.path, a.status)
			}
			if a.body != nil {
				plain = append(plain, a)
			} else if a.shared != "" {
				t.Errorf("%s: a streamed request was shared", tc.path)
			}
		}
		if len(plain) != 2 || plain[0].shared == plain[1].shared {
			t.Fatalf("%s: shared marks %q and %q, want one of two", tc.path, plain[0].shared, plain[1].shared)
		}
		if plain[0].body["id"] != plain[1].body["id"] || !reflect.DeepEqual(tc.text(plain[0].body), tc.text(plain[1].body)) {
			t.Errorf("%s: the shared answer differs: %v / %v", tc.path, plain[0].body, plain[1].body)
		}
		if n := f.Sim.Stats().Requests["model"] - before; n != 2 {
			t.Errorf("%s: model called %d times, want 2 (one shared, one streamed)", tc.path, n)
		}
	}
}
