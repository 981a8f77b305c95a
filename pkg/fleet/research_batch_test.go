package fleet_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/bus"
)

// researchLine is a batch line that runs a research run.
func researchLine(customID string, body map[string]any) string {
	b, _ := json.Marshal(map[string]any{"custom_id": customID, "method": "POST", "url": "/v1/research", "body": body})
	return string(b)
}

// startResearchBatch uploads lines with the openai SDK and starts a batch of endpoint
// /v1/research over them.
func startResearchBatch(t *testing.T, f *fleettest.Fleet, lines ...string) *openai.Batch {
	t.Helper()
	c := openaiClient(f)
	file, err := c.Files.New(ctx(t), openai.FileNewParams{File: openai.File(strings.NewReader(strings.Join(lines, "\n")+"\n"), "research.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Batches.New(ctx(t), openai.BatchNewParams{InputFileID: file.ID, Endpoint: "/v1/research", CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	if b.Endpoint != "/v1/research" || b.RequestCounts.Total != int64(len(lines)) {
		t.Fatalf("batch %s", b.RawJSON())
	}
	return b
}

// A batch of research lines runs a research run per line: the output file holds each
// line's run (completed, its report citing the sources its children found), the
// runs' children are jobs of the batch, and a line a research run would refuse is
// refused with the batch, by line.
func TestResearchBatch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	a := batchClient{t: t, url: f.URL}
	questions := []string{"How do tides work?", "Why is the sky blue?", "What powers the sun?"}
	var lines []string
	for i, q := range questions {
		lines = append(lines, researchLine(fmt.Sprintf("r-%d", i+1), map[string]any{"input": q, "model": "research/sim-model", "effort": "low"}))
	}
	b := startResearchBatch(t, f, lines...)
	done := a.waitBatch(b.ID, 2*time.Minute)
	if done.Status != "completed" || done.RequestCounts.Completed != 3 || done.ErrorFileID != "" {
		t.Fatalf("batch %+v", done)
	}
	out, _ := accountFor(t, a, done, []string{"r-1", "r-2", "r-3"})
	for i, l := range out {
		var run researchRun
		if err := json.Unmarshal(l.Response.Body, &run); err != nil || l.Response.StatusCode != 200 || run.ID != l.Response.RequestID {
			t.Fatalf("line %d: %v %+v %s", i, err, l.Response, l.Response.Body)
		}
		if run.Status != "completed" || run.Output == nil || !strings.Contains(run.Output.Report, "[1]") || run.Usage.Children != 3 {
			t.Fatalf("line %d: run %+v", i, run)
		}
		if got := getResearch(t, f, run.ID); got.Status != "completed" {
			t.Fatalf("run %s: %s", run.ID, got.Status)
		}
		// A child is a job of the batch: on its lane, under its cap.
		code, body, _ := f.Do(t, http.MethodGet, "/v1/jobs/"+run.Rounds[0].Questions[0].JobID, nil)
		if code != http.StatusOK || !strings.Contains(string(body), `"batch_id":"`+b.ID+`"`) {
			t.Fatalf("child of line %d: %d %s", i, code, body)
		}
	}

	// Lines a batch cannot run are refused, each by its line.
	c := openaiClient(f)
	bad := strings.Join([]string{
		researchLine("a", map[string]any{"input": "How do tides work?", "model": "research/sim-model"}),
		researchLine("b", map[string]any{"input": "x", "model": "research/sim-model", "plan": "review"}),
		researchLine("c", map[string]any{"input": "x", "model": "research/gpt-17"}),
		researchLine("d", map[string]any{"input": "x", "model": "research/sim-model", "effort": "extreme"}),
		batchLine("e", "a chat line among research lines"),
	}, "\n")
	_, err := c.Files.New(ctx(t), openai.FileNewParams{File: openai.File(strings.NewReader(bad), "bad.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("bad upload: %v", err)
	}
	for _, want := range []string{"4 invalid", `line 2: plan "review"`, `line 3: the model "research/gpt-17"`, "line 4: effort", `line 5: url "/v1/chat/completions" does not match the batch's endpoint "/v1/research"`} {
		if !strings.Contains(apiErr.Message, want) {
			t.Errorf("error message lacks %q: %s", want, apiErr.Message)
		}
	}
}

// A research batch has at most 8 runs under way at once. Cancelling it cancels its
// runs and their children; every line is in the error file as cancelled.
func TestResearchBatchCancel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	setFault(t, f, map[string]any{"prefix": "/", "slow": "1500ms"})
	a := batchClient{t: t, url: f.URL}
	var lines, ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprintf("r-%d", i+1))
		lines = append(lines, researchLine(ids[i], map[string]any{"input": fmt.Sprintf("Why do leaves change colour (%d)?", i), "model": "research/sim-model", "effort": "low"}))
	}
	b := startResearchBatch(t, f, lines...)
	var run researchRun
	pollUntil(t, time.Minute, "a line's run to submit its children", func() bool {
		code, body, _ := f.Do(t, http.MethodGet, "/v1/research/rr_"+b.ID+"_0", nil)
		json.Unmarshal(body, &run)
		return code == http.StatusOK && len(run.Rounds) > 0 && run.Rounds[0].Questions[0].JobID != ""
	})
	// No line has ended (each takes seconds): the window holds the rest back.
	_, body, _ := f.Do(t, http.MethodGet, "/v1/research?limit=100", nil)
	var list struct {
		Data []researchRun `json:"data"`
	}
	json.Unmarshal(body, &list)
	if len(list.Data) != 8 || a.batch(b.ID).RequestCounts.Completed != 0 {
		t.Fatalf("%d runs under way, want 8", len(list.Data))
	}
	if status, body := a.do("POST", "/v1/batches/"+b.ID+"/cancel", nil); status != 200 {
		t.Fatalf("cancel: %d %s", status, body)
	}
	done := a.waitBatch(b.ID, time.Minute)
	if done.Status != "cancelled" || done.RequestCounts.Completed != 0 {
		t.Fatalf("batch %+v", done)
	}
	_, errs := accountFor(t, a, done, ids)
	for _, l := range errs {
		if l.Error == nil || l.Error.Code != "batch_cancelled" {
			t.Errorf("error line %+v", l)
		}
	}
	waitCancelled(t, f, run.ID)
}

// A research batch's metadata.max_cost_usd reaches its runs: their brain calls and
// their children's turns and searches are held against it, so the runs stop
// spending at the cap, write from what they found, and the batch spends no more than
// the cap and the steps in flight.
func TestResearchBatchCap(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(pricedResearch))
	a := batchClient{t: t, url: f.URL}
	c := openaiClient(f)
	lines := []string{
		researchLine("r-1", map[string]any{"input": "What powers the sun?", "model": "research/sim-model", "effort": "high"}),
		researchLine("r-2", map[string]any{"input": "What powers the wind?", "model": "research/sim-model", "effort": "high"}),
	}
	file, err := c.Files.New(ctx(t), openai.FileNewParams{File: openai.File(strings.NewReader(strings.Join(lines, "\n")), "capped.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	const capUSD = 0.2
	b, err := c.Batches.New(ctx(t), openai.BatchNewParams{InputFileID: file.ID, Endpoint: "/v1/research", CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		Metadata: shared.Metadata{"max_cost_usd": fmt.Sprint(capUSD)}})
	if err != nil {
		t.Fatal(err)
	}
	done := a.waitBatch(b.ID, 2*time.Minute)
	if done.Status != "completed" {
		t.Fatalf("batch %+v", done)
	}
	spent, children, stopped := 0.0, 0, 0
	for i := range 2 {
		run := getResearch(t, f, fmt.Sprintf("rr_%s_%d", b.ID, i))
		spent += run.Usage.CostUSD
		children += run.Usage.Children
		if run.Incomplete != nil && run.Incomplete.Reason == "budget" || run.Status == "failed" {
			stopped++
		}
		t.Logf("run %d: %s, %d children, $%.4f", i, run.Status, run.Usage.Children, run.Usage.CostUSD)
	}
	// One step in flight per run: a brain turn ($0.0075 at most) or a child's turn and search.
	if stopped == 0 || spent > capUSD+0.05 {
		t.Fatalf("the runs spent $%.4f under a $%.2f cap (%d children, %d stopped)", spent, capUSD, children, stopped)
	}
}

// The simple form runs research runs too: with endpoint "/v1/research" each query is
// a research run's input, with the batch's research model and the research fields
// the batch gives every run (custom_ids q-1…q-n). What the lines are is known before
// the queries are read, or the batch is refused.
func TestResearchBatchOfQueries(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	a := batchClient{t: t, url: f.URL}
	status, body := a.do("POST", "/v1/batches", json.RawMessage(`{"endpoint": "/v1/research", "model": "research/sim-model",
		"research": {"effort": "low", "metadata": {"team": "tides"}}, "queries": ["How do tides work?", "Why is the sky blue?"]}`))
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var b batchObject
	json.Unmarshal(body, &b)
	if !strings.Contains(string(body), `"endpoint":"/v1/research"`) {
		t.Fatalf("batch: %s", body)
	}
	done := a.waitBatch(b.ID, 2*time.Minute)
	if done.Status != "completed" || done.RequestCounts.Completed != 2 || done.ErrorFileID != "" {
		t.Fatalf("batch %+v", done)
	}
	out, _ := accountFor(t, a, done, []string{"q-1", "q-2"})
	for i, l := range out {
		var run struct {
			researchRun
			Metadata map[string]string `json:"metadata"`
			Effort   string            `json:"effort"`
		}
		if err := json.Unmarshal(l.Response.Body, &run); err != nil || run.ID != l.Response.RequestID || !strings.HasPrefix(run.ID, "rr_") {
			t.Fatalf("line %d: %v %s", i, err, l.Response.Body)
		}
		if run.Status != "completed" || run.Output == nil || run.Usage.Children != 3 || run.Metadata["team"] != "tides" {
			t.Fatalf("line %d: run %s", i, l.Response.Body)
		}
	}

	for _, c := range []struct{ body, want string }{
		// The lines were written as chat requests (the model known) before the endpoint was read.
		{`{"model": "research/sim-model", "queries": ["How do tides work?"], "endpoint": "/v1/research"}`, "must come before queries"},
		{`{"endpoint": "/v1/research", "model": "research/gpt-17", "queries": ["How do tides work?"]}`, `the model \"research/gpt-17\" does not exist`},
		{`{"endpoint": "/v1/research", "model": "research/sim-model", "research": {"callback": {"url": "http://127.0.0.1:1/x"}}, "queries": ["x?"]}`, "research.callback is not shared"},
		{`{"endpoint": "/v1/research", "model": "research/sim-model", "research": {"plan": "review"}, "queries": ["x?"]}`, `plan \"review\"`},
		{`{"model": "sim-model", "research": {"effort": "low"}, "queries": ["x?"]}`, "research is given with queries to"},
	} {
		if status, body := a.do("POST", "/v1/batches", json.RawMessage(c.body)); status != 400 || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.body, status, body, c.want)
		}
	}
}

// A batch line's run takes its steps (the planner, reflection and writer calls among
// them) in the batch band, on its batch's lane of its tenant, as its children do; any
// other run's steps are in band async, on its tenant's lane.
func TestResearchBatchStepsAreInTheBatchBand(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	nc, err := nats.Connect(f.NATS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	steps := map[string][]string{} // run id → the subjects of its steps
	sub, err := nc.Subscribe(bus.SubjectResearch+".>", func(m *nats.Msg) {
		var env struct {
			Data bus.ResearchStep `json:"data"`
		}
		json.Unmarshal(m.Data, &env)
		mu.Lock()
		steps[env.Data.RunID] = append(steps[env.Data.RunID], m.Subject)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	bare, err := nc.Subscribe(bus.SubjectResearch, func(m *nats.Msg) { t.Errorf("a step on no lane: %s", m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Unsubscribe() })
	nc.Flush()

	a := batchClient{t: t, url: f.URL}
	b := startResearchBatch(t, f, researchLine("r-1", map[string]any{"input": "How do tides work?", "model": "research/sim-model", "effort": "low"}))
	solo := startResearch(t, f, map[string]any{"input": "Why is the sky blue?", "model": "research/sim-model", "effort": "low"})
	if done := a.waitBatch(b.ID, 2*time.Minute); done.Status != "completed" || done.RequestCounts.Completed != 1 {
		t.Fatalf("batch %+v", done)
	}
	waitResearch(t, f, solo.ID, ended)
	out, _ := accountFor(t, a, a.batch(b.ID), []string{"r-1"})
	line := out[0].Response.RequestID
	mu.Lock()
	defer mu.Unlock()
	for run, want := range map[string]bus.Lane{line: {Band: bus.BandBatch, Tenant: bus.Token("default"), Key: bus.Token(b.ID)},
		solo.ID: {Band: bus.BandAsync, Tenant: bus.Token("default")}} {
		// start, a child's end each (three), and the run's own.
		if len(steps[run]) < 4 {
			t.Errorf("run %s: steps %v", run, steps[run])
		}
		for _, s := range steps[run] {
			if l, ok := bus.LaneOf(bus.SubjectResearch, s); !ok || l != want {
				t.Errorf("run %s: a step on %s, want the lane %+v", run, s, want)
			}
		}
	}
}
