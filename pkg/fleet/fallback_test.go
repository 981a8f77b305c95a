package fleet_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// With brave failing (a standing 503) and tavily as its fallback, sim:engine=brave
// jobs still complete with cited answers; the trace says brave fell back to tavily
// and lists tavily's sources; brave was asked once per search and never again.
func TestBraveFailingFallsBackToTavily(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(f *config.File) {
		for i := range f.WebSearch.Engines {
			if f.WebSearch.Engines[i].ID == "brave" {
				f.WebSearch.Engines[i].Fallback = []string{"tavily"}
			}
		}
	}))
	f.Sim.SetFault("/brave", 503, 0, 0)
	const jobs = 3
	for i := range jobs {
		status, resp := f.Chat(t, fmt.Sprintf("Search the web: what is new with NATS JetStream, item %d? sim:engine=brave", i))
		if status != 200 {
			t.Fatalf("%d %v", status, resp)
		}
		if c := fleettest.Content(resp); !strings.Contains(c, "[1]") {
			t.Fatalf("answer does not cite: %q", c)
		}
		job, err := f.Store.Jobs.GetJob(t.Context(), jobID(t, resp))
		if err != nil {
			t.Fatal(err)
		}
		var trace []struct {
			Engine   string                 `json:"engine"`
			Sources  []struct{ URL string } `json:"sources"`
			Error    string                 `json:"error"`
			Fallback *struct {
				From   string `json:"from"`
				Engine string `json:"engine"`
				Tried  []struct{ Engine, Reason string }
			} `json:"fallback"`
		}
		if err := json.Unmarshal(job.Trace, &trace); err != nil || len(trace) != 1 {
			t.Fatalf("trace %s (%v)", job.Trace, err)
		}
		e := trace[0]
		if e.Engine != "brave" || e.Error != "" || len(e.Sources) == 0 || e.Fallback == nil ||
			e.Fallback.From != "brave" || e.Fallback.Engine != "tavily" || len(e.Fallback.Tried) != 1 || e.Fallback.Tried[0].Reason != "unavailable" {
			t.Fatalf("trace does not show the fallback: %s", job.Trace)
		}
	}
	st := f.Sim.Stats()
	if st.Requests["brave"] != jobs || st.Requests["tavily"] != jobs {
		t.Errorf("engine requests %v, want brave and tavily %d each", st.Requests, jobs)
	}
	if st.Duplicates["tavily"] != 0 || st.Duplicates["brave"] != 0 {
		t.Errorf("tavily paid twice for one search: %v", st.Duplicates)
	}
}

// An engine with two keys, one rate limited: every search still answers (the other
// key carries it), the limited key is sent once and rests, and the fleet counts the
// rest in fleet_engine_key_cooldowns_total.
func TestRateLimitedKeyRotatesAndIsCounted(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(f *config.File) {
		for i := range f.WebSearch.Engines {
			if e := &f.WebSearch.Engines[i]; e.ID == "brave" {
				e.APIKey, e.APIKeys = "brave-one", []string{"brave-one", "brave-two"}
			}
		}
	}))
	f.Sim.SetKeyFault("/brave", "brave-one", 429, time.Minute, 0)
	const jobs = 3
	for i := range jobs {
		status, resp := f.Chat(t, fmt.Sprintf("Search the web: what is new with NATS JetStream, item %d? sim:engine=brave", i))
		if status != 200 || !strings.Contains(fleettest.Content(resp), "[1]") {
			t.Fatalf("%d %v", status, resp)
		}
	}
	if got := f.Sim.Stats().Requests["brave"]; got != jobs+1 {
		t.Errorf("%d brave requests, want %d (the limited key once)", got, jobs+1)
	}
	_, body, _ := f.Do(t, "GET", "/metrics", nil)
	if !strings.Contains(string(body), `fleet_engine_key_cooldowns_total{engine="brave",reason="rate_limited"} 1`) {
		t.Errorf("metrics lack the key's rest:\n%s", grepLines(string(body), "fleet_engine_key"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A main-model provider with two keys, one rate limited: every job still answers in
// its first step (the other key carries each model call at once), the limited key
// rests once for every chat worker, and the fleet counts the rest in
// fleet_model_key_cooldowns_total.
func TestRateLimitedModelKeyRotatesAndIsCounted(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(f *config.File) {
		p := f.Providers["sim"]
		p.APIKey, p.APIKeys = "sim-model-one", []string{"sim-model-one", "sim-model-two"}
		f.Providers["sim"] = p
	}))
	f.Sim.SetKeyFault("/v1/chat/completions", "sim-model-one", 429, time.Minute, 0)
	for i := range 3 {
		status, resp := f.Chat(t, fmt.Sprintf("Search the web: what is new with NATS JetStream, item %d?", i))
		if status != 200 || !strings.Contains(fleettest.Content(resp), "[1]") {
			t.Fatalf("%d %v", status, resp)
		}
	}
	_, body, _ := f.Do(t, "GET", "/metrics", nil)
	if !strings.Contains(string(body), `fleet_model_key_cooldowns_total{provider="sim",reason="rate_limited"} 1`) {
		t.Errorf("metrics lack the key's rest:\n%s", grepLines(string(body), "fleet_model_key"))
	}
}
