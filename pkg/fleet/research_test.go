package fleet_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// researchRun is the part of a run's view the tests read.
type researchRun struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Plan   *struct {
		Questions []struct {
			Question string `json:"question"`
		} `json:"questions"`
	} `json:"plan"`
	Rounds []struct {
		Questions []struct {
			JobID   string `json:"job_id"`
			Status  string `json:"status"`
			Sources []struct {
				URL string `json:"url"`
			} `json:"sources"`
		} `json:"questions"`
	} `json:"rounds"`
	Output *struct {
		Report  string `json:"report"`
		Sources []struct {
			URL     string `json:"url"`
			Excerpt string `json:"excerpt"`
		} `json:"sources"`
		Object json.RawMessage `json:"object"`
		Basis  map[string]struct {
			Citations []struct {
				URL     string `json:"url"`
				Excerpt string `json:"excerpt"`
			} `json:"citations"`
			Confidence string `json:"confidence"`
		} `json:"basis"`
		Citations struct{ Cited, Valid, Removed int } `json:"citations"`
	} `json:"output"`
	Incomplete *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage struct {
		CostUSD  float64 `json:"cost_usd"`
		Searches int     `json:"searches"`
		Children int     `json:"children"`
	} `json:"usage"`
}

func startResearch(t *testing.T, f *fleettest.Fleet, body map[string]any) researchRun {
	t.Helper()
	code, b, _ := f.Do(t, http.MethodPost, "/v1/research", body)
	if code != http.StatusAccepted {
		t.Fatalf("POST /v1/research: %d %s", code, b)
	}
	var r researchRun
	if err := json.Unmarshal(b, &r); err != nil || !strings.HasPrefix(r.ID, "rr_") {
		t.Fatalf("run: %s (%v)", b, err)
	}
	return r
}

func getResearch(t *testing.T, f *fleettest.Fleet, id string) researchRun {
	t.Helper()
	code, b, _ := f.Do(t, http.MethodGet, "/v1/research/"+id, nil)
	if code != http.StatusOK {
		t.Fatalf("GET run: %d %s", code, b)
	}
	var r researchRun
	json.Unmarshal(b, &r)
	return r
}

func waitResearch(t *testing.T, f *fleettest.Fleet, id string, done func(researchRun) bool) researchRun {
	t.Helper()
	var r researchRun
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if r = getResearch(t, f, id); done(r) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("run %s never got there: %+v", id, r)
	return r
}

func ended(r researchRun) bool {
	return r.Status == "completed" || r.Status == "failed" || r.Status == "cancelled"
}

// A run plans, runs each sub-question as a child job, writes a report whose every
// kept marker resolves to a source a child searched, and lists its sources.
func TestResearchRun(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	r := startResearch(t, f, map[string]any{"input": "Who built the Golden Gate Bridge?", "model": "research/sim-model", "effort": "medium"})
	r = waitResearch(t, f, r.ID, ended)
	if r.Status != "completed" || r.Output == nil {
		t.Fatalf("run: %+v", r)
	}
	if len(r.Plan.Questions) != 6 || len(r.Rounds) != 2 || len(r.Rounds[1].Questions) != 3 {
		t.Fatalf("plan of %d, %d rounds", len(r.Plan.Questions), len(r.Rounds))
	}
	searched := map[string]bool{}
	for _, rd := range r.Rounds {
		for _, q := range rd.Questions {
			if q.Status != "completed" || q.JobID == "" {
				t.Fatalf("child %+v", q)
			}
			for _, s := range q.Sources {
				searched[s.URL] = true
			}
		}
	}
	if len(r.Output.Sources) == 0 || r.Output.Citations.Valid == 0 || r.Usage.Children != 9 || r.Usage.Searches < 9 {
		t.Fatalf("output: %d sources, citations %+v, usage %+v", len(r.Output.Sources), r.Output.Citations, r.Usage)
	}
	for _, s := range r.Output.Sources {
		if !searched[s.URL] {
			t.Errorf("source %s was not searched by a child", s.URL)
		}
	}
	if !strings.Contains(r.Output.Report, "## Sources") || !strings.Contains(r.Output.Report, "[1]") {
		t.Errorf("report:\n%s", r.Output.Report)
	}
	t.Logf("report:\n%s\ncitations %+v usage %+v", r.Output.Report, r.Output.Citations, r.Usage)
	// A child is an ordinary job of the tenant.
	code, b, _ := f.Do(t, http.MethodGet, "/v1/jobs/"+r.Rounds[0].Questions[0].JobID, nil)
	if code != http.StatusOK || !strings.Contains(string(b), `"completed"`) {
		t.Fatalf("child job: %d %s", code, b)
	}
}
