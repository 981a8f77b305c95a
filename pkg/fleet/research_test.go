package fleet_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/spend"
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
		Fetches  int     `json:"fetches"`
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

// With an output_schema, the run's object validates against the schema (a real JSON
// Schema validator) and every top-level field has a basis whose citations resolve to
// the run's sources, with the excerpt relied on.
func TestResearchOutputSchema(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []string{"summary", "builders", "count"},
		"properties": map[string]any{"summary": map[string]any{"type": "string", "minLength": 1},
			"builders": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"count":    map[string]any{"type": "integer", "minimum": 1}}}
	r := startResearch(t, f, map[string]any{"input": "Who built the Golden Gate Bridge?", "model": "research/sim-model", "effort": "low", "output_schema": schema})
	r = waitResearch(t, f, r.ID, ended)
	if r.Status != "completed" || r.Output == nil || r.Output.Object == nil {
		t.Fatalf("run: %+v", r)
	}
	sb, _ := json.Marshal(schema)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sb))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Output.Object))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(obj); err != nil {
		t.Fatalf("the object does not validate: %v\n%s", err, r.Output.Object)
	}
	sources := map[string]bool{}
	for _, s := range r.Output.Sources {
		sources[s.URL] = true
	}
	for _, k := range []string{"summary", "builders", "count"} {
		b, ok := r.Output.Basis[k]
		if !ok || len(b.Citations) == 0 || b.Confidence == "" {
			t.Errorf("field %s: basis %+v", k, b)
		}
		for _, c := range b.Citations {
			if !sources[c.URL] || c.Excerpt == "" {
				t.Errorf("field %s cites %+v, not one of the run's sources with its excerpt", k, c)
			}
		}
	}
}

// plan "review" stops at requires_action with the plan and sends its webhook; a
// replaced plan runs as replaced; an approval of a run that does not wait is refused.
func TestResearchPlanReview(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	rcv := newReceiver(t, func(int) int { return http.StatusOK })
	r := startResearch(t, f, map[string]any{"input": "How do tides work?", "model": "research/sim-model", "effort": "low", "plan": "review",
		"callback": map[string]any{"url": rcv.URL}})
	r = waitResearch(t, f, r.ID, func(r researchRun) bool { return r.Status == "requires_action" })
	if r.Plan == nil || len(r.Plan.Questions) != 3 || len(r.Rounds) != 0 {
		t.Fatalf("plan under review: %+v", r)
	}
	researchWebhook(t, rcv, "research.requires_action")
	code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+r.ID+"/plan", map[string]any{"plan": map[string]any{"questions": []map[string]string{
		{"question": "What makes the tides rise?"}, {"question": "When are spring tides?"}}}})
	if code != http.StatusOK {
		t.Fatalf("replace: %d %s", code, b)
	}
	r = waitResearch(t, f, r.ID, ended)
	if r.Status != "completed" || len(r.Rounds) != 1 || len(r.Rounds[0].Questions) != 2 {
		t.Fatalf("replaced plan: %+v", r)
	}
	if code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+r.ID+"/plan", map[string]any{"action": "approve"}); code != http.StatusConflict {
		t.Fatalf("approving an ended run: %d %s", code, b)
	}
	researchWebhook(t, rcv, "research.completed")
	// An approval runs the plan as it was written.
	a := startResearch(t, f, map[string]any{"input": "How do rivers form?", "model": "research/sim-model", "effort": "low", "plan": "review"})
	a = waitResearch(t, f, a.ID, func(r researchRun) bool { return r.Status == "requires_action" })
	if code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+a.ID+"/plan", map[string]any{"action": "approve"}); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, b)
	}
	planned := a.Plan.Questions
	a = waitResearch(t, f, a.ID, ended)
	if a.Status != "completed" || len(a.Rounds) != 1 || len(a.Rounds[0].Questions) != len(planned) || a.Rounds[0].Questions[0].Status != "completed" {
		t.Fatalf("approved plan: %+v", a)
	}
}

// Cancelling a running run ends it cancelled, and its children that ran cancelled.
func TestResearchCancel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	// Every call takes long: the children are out when the cancel lands.
	setFault(t, f, map[string]any{"prefix": "/", "slow": "1500ms"})
	r := startResearch(t, f, map[string]any{"input": "Why is the sky blue?", "model": "research/sim-model", "effort": "low"})
	r = waitResearch(t, f, r.ID, func(r researchRun) bool { return len(r.Rounds) > 0 && r.Rounds[0].Questions[0].JobID != "" })
	if code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+r.ID+"/cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, b)
	}
	r = waitCancelled(t, f, r.ID)
	if code, _, _ := f.Do(t, http.MethodPost, "/v1/research/"+r.ID+"/cancel", nil); code != http.StatusConflict {
		t.Fatalf("cancelling an ended run: %d", code)
	}
}

// A run cancelled while its plan waits for approval (no child out) tells its
// callback it was cancelled.
func TestResearchCancelTellsCallback(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	rcv := newReceiver(t, func(int) int { return http.StatusOK })
	r := startResearch(t, f, map[string]any{"input": "How do rivers freeze?", "model": "research/sim-model", "effort": "low", "plan": "review",
		"callback": map[string]any{"url": rcv.URL}})
	waitResearch(t, f, r.ID, func(r researchRun) bool { return r.Status == "requires_action" })
	if code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+r.ID+"/cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, b)
	}
	researchWebhook(t, rcv, "research.cancelled")
}

// waitCancelled waits for run id to end cancelled, and every child it submitted to
// end cancelled too.
func waitCancelled(t *testing.T, f *fleettest.Fleet, id string) researchRun {
	t.Helper()
	r := waitResearch(t, f, id, ended)
	if r.Status != "cancelled" || len(r.Rounds) == 0 {
		t.Fatalf("run %s: %s", id, r.Status)
	}
	for _, q := range r.Rounds[0].Questions {
		fleettest.Eventually(t, "child "+q.JobID+" cancelled", func() bool {
			_, b, _ := f.Do(t, http.MethodGet, "/v1/jobs/"+q.JobID, nil)
			return strings.Contains(string(b), `"status":"cancelled"`)
		})
	}
	return r
}

// researchWebhook waits for a signed delivery of event typ.
func researchWebhook(t *testing.T, rcv *receiver, typ string) {
	t.Helper()
	fleettest.Eventually(t, "the "+typ+" webhook", func() bool {
		for _, d := range rcv.deliveries() {
			if strings.Contains(string(d.body), `"type":"`+typ+`"`) && d.header.Get("webhook-signature") != "" {
				return true
			}
		}
		return false
	})
}

func setFault(t *testing.T, f *fleettest.Fleet, fault map[string]any) {
	t.Helper()
	b, _ := json.Marshal(fault)
	resp, err := http.Post(f.SimURL+"/_sim/faults", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// pricedResearch prices the brain ($3 and $15 a million tokens, at most 500 out) and
// brave's searches ($0.01).
func pricedResearch(file *config.File) {
	pricedBrave(file)
	m := file.Models[demo.Model]
	m.Pricing = &spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15, MaxOutputTokens: 500}
	file.Models[demo.Model] = m
}

// A run with budget.max_usd stops spending at its cap: fewer children than planned,
// the report written from what they found, completed with incomplete_details
// {reason: "budget"}, and its spend within the cap and one step in flight.
func TestResearchBudget(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(pricedResearch))
	const capUSD = 0.25
	r := startResearch(t, f, map[string]any{"input": "What powers the sun?", "model": "research/sim-model", "effort": "high", "budget": map[string]any{"max_usd": capUSD}})
	r = waitResearch(t, f, r.ID, ended)
	if r.Status != "completed" || r.Incomplete == nil || r.Incomplete.Reason != "budget" || r.Output == nil {
		_, b, _ := f.Do(t, http.MethodGet, "/v1/jobs/"+r.Rounds[0].Questions[0].JobID, nil)
		t.Logf("child: %s", b)
		t.Fatalf("run: %+v", r)
	}
	if r.Usage.Children == 0 || r.Usage.Children >= 12 {
		t.Fatalf("%d children of 12 planned", r.Usage.Children)
	}
	// One step in flight: at most one child's share or one brain turn past the cap.
	if r.Usage.CostUSD > capUSD+0.05 {
		t.Fatalf("spent $%.4f of a $%.2f cap", r.Usage.CostUSD, capUSD)
	}
	t.Logf("%d children, $%.4f", r.Usage.Children, r.Usage.CostUSD)
}

// Two identical requests of one tenant while the first runs share it, unless the
// second opts out; the events stream replays from any event id.
func TestResearchShareAndEvents(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	setFault(t, f, map[string]any{"prefix": "/v1/chat", "slow": "300ms", "times": 1})
	body := map[string]any{"input": "What is dark matter?", "model": "research/sim-model", "effort": "low"}
	a := startResearch(t, f, body)
	code, b, h := f.Do(t, http.MethodPost, "/v1/research", body)
	var second researchRun
	json.Unmarshal(b, &second)
	if code != http.StatusAccepted || second.ID != a.ID || h.Get("Searchfleet-Shared-Run") != "true" {
		t.Fatalf("identical request: %d %s (first %s)", code, second.ID, a.ID)
	}
	body["share"] = false
	if own := startResearch(t, f, body); own.ID == a.ID {
		t.Fatal("share: false shared the run")
	}
	waitResearch(t, f, a.ID, ended)
	events := func(after string) []string {
		req, _ := http.NewRequest(http.MethodGet, f.URL+"/v1/research/"+a.ID+"/events", nil)
		if after != "" {
			req.Header.Set("Last-Event-ID", after)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ids []string
		all, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(all), "\n") {
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				ids = append(ids, v)
			}
		}
		return ids
	}
	all := events("")
	if len(all) < 8 {
		t.Fatalf("%d events", len(all))
	}
	if rest := events(all[3]); len(rest) != len(all)-4 || rest[0] != all[4] {
		t.Fatalf("resumed after %s: %v of %v", all[3], rest, all)
	}
}

// Verification removes a citation whose source does not say what the report claims
// (the simulated writer adds one on sim:bad-claim) and marks the claim unverified.
func TestResearchVerifiesClaims(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	r := startResearch(t, f, map[string]any{"input": "How are glaciers formed? sim:bad-claim", "model": "research/sim-model", "effort": "low"})
	r = waitResearch(t, f, r.ID, ended)
	if r.Status != "completed" || r.Output == nil {
		t.Fatalf("run: %+v", r)
	}
	if !strings.Contains(r.Output.Report, "The moon is made of green cheese _(unverified)_.") || r.Output.Citations.Removed != 1 || r.Output.Citations.Valid == 0 {
		t.Fatalf("citations %+v, report:\n%s", r.Output.Citations, r.Output.Report)
	}
}

// Children read pages where their effort lets them fetch (the simulated planner's
// sim:read has each read one and then search), and only there: the reads are
// counted in the run's usage, and a page read is a source whose excerpt is the
// page's text.
func TestResearchReadsPages(t *testing.T) {
	t.Parallel()
	f := fetchFleet(t)
	page := guidePage(t)
	r := startResearch(t, f, map[string]any{"input": "How does the fleet read pages? sim:read=" + page, "model": "research/sim-model", "effort": "medium"})
	r = waitResearch(t, f, r.ID, ended)
	if r.Status != "completed" || r.Output == nil || r.Usage.Fetches < 6 || r.Usage.Searches < 9 {
		t.Fatalf("run: %s, usage %+v", r.Status, r.Usage)
	}
	read := 0
	for _, s := range r.Output.Sources {
		if strings.HasPrefix(s.URL, strings.TrimSuffix(page, "/guide")) && strings.Contains(s.Excerpt, "SSRF guard") {
			read++
		}
	}
	if read == 0 {
		t.Fatalf("no page read is a source: %+v", r.Output.Sources)
	}
	// Effort low reads no page, though its children have one to read.
	low := startResearch(t, f, map[string]any{"input": "How does the fleet read pages? sim:read=" + page, "model": "research/sim-model", "effort": "low"})
	if low = waitResearch(t, f, low.ID, ended); low.Status != "completed" || low.Usage.Fetches != 0 || low.Usage.Searches < 3 {
		t.Fatalf("effort low: %s, usage %+v", low.Status, low.Usage)
	}
}
