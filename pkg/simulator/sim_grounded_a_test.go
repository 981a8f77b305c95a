package simulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// groundedAKeyEnv is this file's own key variable, so parallel tests elsewhere that
// set SIM_API_KEY cannot interfere.
const groundedAKeyEnv = "SEARCHFLEET_GROUNDEDA_SIM_KEY"

// The gemini, openai and anthropic engines, configured by the simulator itself and
// pointed at it, search, report empty results, and classify injected faults.
func TestGroundedASimulator(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	os.Setenv(groundedAKeyEnv, "sim-key-groundedA")

	byKind := map[string]engines.Config{}
	for _, c := range sim.EngineConfigs(srv.URL) {
		c.APIKeyEnv = groundedAKeyEnv
		byKind[c.Kind] = c
	}
	vertex := byKind["gemini"]
	vertex.ID = "gemini-vertex"
	vertex.Options = json.RawMessage(`{"vertex":{"project":"sim-project","location":"us-central1"}}`)

	for _, c := range []struct {
		cfg     engines.Config
		model   string
		wantErr string // the provider's envelope, as the engine reports it
	}{
		{byKind["gemini"], "gemini-2.5-flash", "simulated Gemini failure"},
		{vertex, "gemini-2.5-flash", "simulated Gemini failure"},
		{byKind["openai"], "gpt-5-mini", "simulated OpenAI failure"},
		{byKind["anthropic"], "claude-sonnet-4-5", "simulated Anthropic failure"},
	} {
		t.Run(c.cfg.ID, func(t *testing.T) {
			if c.cfg.Kind == "" {
				t.Fatal("the simulator offers no config for this kind")
			}
			if c.cfg.Model != c.model || c.cfg.BaseURL != srv.URL+"/"+c.cfg.Kind {
				t.Errorf("config = %+v", c.cfg)
			}
			reg, err := engines.FromConfig([]engines.Config{c.cfg}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			eng, _ := reg.Get(c.cfg.ID)
			search := func(q string) (*engines.Result, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return eng.Search(ctx, engines.Query{Query: q})
			}

			res, err := search("who won the 2022 world cup")
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			enginetest.CheckInvariants(t, res)
			// The grounded answer quotes pages made from the query, each cited.
			if len(res.Hits) == 0 || len(engines.Markers(res.Summary)) == 0 || !strings.Contains(res.Summary, "who won the 2022 world cup, simulated result 1 of 5.") {
				t.Errorf("hits %d, summary %q", len(res.Hits), res.Summary)
			}
			// The recording itself, when a test asks for it.
			res, err = search("recorded sim:fixture")
			if err != nil || len(res.Hits) == 0 || strings.Contains(res.Summary, "simulated result") {
				t.Errorf("sim:fixture: %v, %+v", err, res)
			}

			res, err = search("nothing here sim:empty")
			if err != nil {
				t.Fatalf("sim:empty: %v", err)
			}
			if len(res.Hits) != 0 || !strings.Contains(res.Summary, "(simulated)") {
				t.Errorf("sim:empty gave %d hits, summary %q", len(res.Hits), res.Summary)
			}

			_, err = search("weather sim:429")
			var e *engines.Error
			if !errors.As(err, &e) || e.Kind != engines.RateLimited || e.RetryAfter != time.Second {
				t.Fatalf("sim:429 gave %v", err)
			}
			if e.Status != 429 || !strings.Contains(e.Message, c.wantErr) {
				t.Errorf("sim:429 error = %v", e)
			}

			_, err = search("weather sim:500")
			if !errors.As(err, &e) || e.Kind != engines.Unavailable {
				t.Errorf("sim:500 gave %v", err)
			}
			_, err = search("weather sim:401")
			if !errors.As(err, &e) || e.Kind != engines.Auth {
				t.Errorf("sim:401 gave %v", err)
			}
		})
	}
	if n := sim.Stats().Requests["gemini"]; n != 12 {
		t.Errorf("gemini route counted %d requests, want 12 (6 per deployment)", n)
	}
}

// A Gemini path without the :generateContent method is not answered as one.
func TestGroundedAGeminiMethodSuffix(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(simulator.New(simulator.Options{}))
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Post(srv.URL+"/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"q"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Status string } `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	if body.Error.Status != "NOT_FOUND" {
		t.Errorf("error status = %q", body.Error.Status)
	}
}
