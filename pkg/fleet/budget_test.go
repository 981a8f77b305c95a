package fleet_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// budgetCall posts body to url+path as the tenant's key and returns status, body and
// headers.
func budgetCall(t *testing.T, url, path, key string, body any) (int, []byte, http.Header) {
	t.Helper()
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, _ := json.Marshal(body)
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header
}

// The headline of the spend budget: a tenant with $0.05 a day and an engine at $0.01 a
// search makes exactly five paid searches across concurrent jobs on two fleet
// processes (two search workers on one NATS and Redis). Every other job's model reads
// SEARCH_BUDGET_EXHAUSTED and still answers; the tenant's next job gets 429 naming the
// budget, in each protocol's error shape. A search that failed unbilled first gave its
// reservation back.
func TestTenantDailyBudgetAcrossWorkers(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	natsURL := bustest.Server(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = natsURL, prefix
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	price := 0.01
	for i, e := range file.WebSearch.Engines {
		if e.ID == "brave" {
			file.WebSearch.Engines[i].CostPerSearchUSD = &price
		}
	}
	const key = "budget-key"
	file.Tenants = []config.Tenant{{ID: "acme", APIKeyEnv: "BUDGETTEST_KEY", APIKeys: []string{key}, Budget: &spend.Budget{USDPerDay: 0.05}}}
	if err := file.Validate(); err != nil {
		t.Fatal(err)
	}
	urls := make([]string, 2)
	ms := make([]*metrics.Metrics, 2) // with tenants, the API port serves no /metrics
	for i := range urls {
		ms[i] = metrics.New()
		urls[i], _ = fleettest.RunMetered(t, env, file, rdb, ms[i])
	}
	chat := func(url, text string) (int, []byte, http.Header) {
		return budgetCall(t, url, "/v1/chat/completions", key, map[string]any{
			"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": text}}})
	}

	// An engine call that fails without billing releases what it reserved. (On tavily:
	// a refused key rests for every worker, and brave's must stay usable below.)
	if status, body, _ := chat(urls[0], "Search the web: weather today? sim:engine=tavily sim:401"); status != 200 {
		t.Fatalf("failed search: %d %s", status, body)
	}
	// An accepted asynchronous job (no search) whose client retries after the budget ran out.
	retry := func() (int, []byte) {
		b, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "hello sim:nosearch"}}})
		req, _ := http.NewRequest(http.MethodPost, urls[0]+"/v1/jobs", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Idempotency-Key", "budget-retry")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	status, first := retry()
	if status != http.StatusAccepted {
		t.Fatalf("async job: %d %s", status, first)
	}
	store := fleettest.Store(t, rdb, prefix, natsURL, "", 0)
	if sp, err := store.Ledger.SpendOf(t.Context(), "acme", time.Now()); err != nil || sp.DaySearches != 0 || sp.DayUSD != 0 {
		t.Fatalf("spend after an unbilled failure = %+v, %v; want nothing held", sp, err)
	}
	sim.Reset()

	const jobs = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	for i := range jobs {
		wg.Go(func() {
			// The model takes 2 s to answer, so all twelve are admitted before the first
			// search reserves: the ingress refuses new jobs once reservations fill the
			// budget, and this test is about the jobs already running.
			status, body, _ := chat(urls[i%2], fmt.Sprintf("Search the web: weather today in city %d? sim:engine=brave sim:model-slow=2s", i))
			var resp map[string]any
			if status != 200 || json.Unmarshal(body, &resp) != nil {
				t.Errorf("job %d: %d %s", i, status, body)
				return
			}
			mu.Lock()
			ids = append(ids, jobID(t, resp))
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n := sim.Stats().Requests["brave"]; n != 5 {
		t.Errorf("paid searches = %d, want exactly 5 ($0.05 at $0.01)", n)
	}
	refused := 0
	for _, id := range ids {
		job, err := store.Jobs.GetJob(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.Status != state.Completed {
			t.Errorf("job %s ended %s, want completed with what it had", id, job.Status)
		}
		if strings.Contains(string(job.Trace), "SEARCH_BUDGET_EXHAUSTED") {
			refused++
		}
	}
	if refused != jobs-5 {
		t.Errorf("%d jobs read SEARCH_BUDGET_EXHAUSTED, want %d", refused, jobs-5)
	}

	// The next job is refused at the door, in each protocol's shape.
	status, body, h := chat(urls[1], "Search the web: one more?")
	if status != http.StatusTooManyRequests || !strings.Contains(string(body), "daily spending budget of $0.05 is used up") {
		t.Fatalf("job past the budget: %d %s", status, body)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 || s > 86400 {
		t.Errorf("Retry-After %q, want the seconds until UTC midnight", h.Get("Retry-After"))
	}
	var oe struct {
		Error struct{ Type, Code, Message string }
	}
	if json.Unmarshal(body, &oe) != nil || oe.Error.Code != "budget_exhausted" {
		t.Errorf("OpenAI error shape: %s", body)
	}
	for _, path := range []string{"/v1/responses", "/v1/jobs", "/v1/search", "/v1/batches"} {
		req := map[string]any{"model": demo.Model, "input": "Search the web: one more?", "query": "one more",
			"messages": []any{map[string]any{"role": "user", "content": "Search the web: one more?"}}}
		if path == "/v1/responses" {
			delete(req, "messages")
		}
		status, body, _ := budgetCall(t, urls[0], path, key, req)
		if json.Unmarshal(body, &oe) != nil || status != http.StatusTooManyRequests || oe.Error.Code != "budget_exhausted" {
			t.Errorf("%s past the budget: %d %s", path, status, body)
		}
	}
	status, body, _ = budgetCall(t, urls[0], "/v1/messages", key, map[string]any{"model": demo.Model, "max_tokens": 100,
		"messages": []any{map[string]any{"role": "user", "content": "Search the web: one more?"}}})
	var ae struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if status != http.StatusTooManyRequests || json.Unmarshal(body, &ae) != nil || ae.Type != "error" || ae.Error.Type != "rate_limit_error" ||
		!strings.Contains(ae.Error.Message, "daily spending budget of $0.05") {
		t.Errorf("Anthropic messages past the budget: %d %s", status, body)
	}

	var j1, j2 struct{ ID string }
	json.Unmarshal(first, &j1)
	if status, again := retry(); status != http.StatusAccepted || json.Unmarshal(again, &j2) != nil || j2.ID != j1.ID || j1.ID == "" {
		t.Errorf("a retry of an accepted job under its Idempotency-Key: %d %s, want 202 with job %s", status, again, j1.ID)
	}

	// The tenant sees its spend and what is left.
	status, body, _ = budgetCall(t, urls[0], "/v1/usage", key, nil)
	var u struct {
		Tenant string
		Day    struct {
			SpentUSD     float64  `json:"spent_usd"`
			Searches     int64    `json:"searches"`
			BudgetUSD    *float64 `json:"budget_usd"`
			RemainingUSD *float64 `json:"remaining_usd"`
		}
	}
	if status != 200 || json.Unmarshal(body, &u) != nil || u.Tenant != "acme" || u.Day.SpentUSD != 0.05 || u.Day.Searches != 5 ||
		u.Day.BudgetUSD == nil || *u.Day.RemainingUSD != 0 {
		t.Errorf("usage: %d %s", status, body)
	}

	// Prometheus: the spend of both processes adds up to the five searches.
	spend, exhausted := 0.0, 0.0
	spendRE := regexp.MustCompile(`(?m)^fleet_spend_usd_total\{kind="search",source="brave",tenant="acme"\} (\S+)$`)
	exhaustedRE := regexp.MustCompile(`(?m)^fleet_budget_exhausted_total\{budget="usd_day",tenant="acme"\} (\S+)$`)
	for i, url := range urls {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(ms[i].Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b := rec.Body.Bytes()
		if m := spendRE.FindSubmatch(b); m != nil {
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			spend += v
		}
		// Which process ran how many searches (ok and refused), for the log.
		ran := regexp.MustCompile(`(?m)^fleet_searches_total\{engine="brave",outcome="(ok|budget_exhausted)"\} (\S+)$`).FindAllSubmatch(b, -1)
		for _, m := range ran {
			t.Logf("%s: %s searches %s", url, m[1], m[2])
		}
		if m := exhaustedRE.FindSubmatch(b); m != nil {
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			exhausted += v
		}
	}
	if spend < 0.0499 || spend > 0.0501 || exhausted != float64(jobs-5+6) {
		t.Errorf("metrics: spend %v (want 0.05), exhausted %v (want %d: %d searches, 6 requests)", spend, exhausted, jobs-5+6, jobs-5)
	}
}

// A budget with room for less than the next search admits the request at the door
// (it is not used up), and the search worker refuses the search itself: a direct
// search then fails with 429 and the budget named, and nothing reaches the engine.
func TestBudgetRefusedAtTheWorker(t *testing.T) {
	t.Parallel()
	const key = "budget-key-2"
	price := 0.01
	f := fleettest.Start(t, fleettest.File(func(file *config.File) {
		for i, e := range file.WebSearch.Engines {
			if e.ID == "brave" {
				file.WebSearch.Engines[i].CostPerSearchUSD = &price
			}
		}
		file.Tenants = []config.Tenant{{ID: "small", APIKeyEnv: "BUDGETTEST_KEY2", APIKeys: []string{key}, Budget: &spend.Budget{USDPerDay: 0.015}}}
	}))
	search := func() (int, []byte) {
		status, body, _ := budgetCall(t, f.URL, "/v1/search", key, map[string]any{"query": "go generics", "engine": "brave"})
		return status, body
	}
	if status, body := search(); status != 200 {
		t.Fatalf("first search: %d %s", status, body)
	}
	status, body := search()
	var oe struct {
		Error struct{ Type, Code, Message string }
	}
	if status != http.StatusTooManyRequests || json.Unmarshal(body, &oe) != nil || oe.Error.Code != "budget_exhausted" ||
		!strings.Contains(oe.Error.Message, "daily spending budget of $0.015") {
		t.Fatalf("second search: %d %s", status, body)
	}
	if n := f.Sim.Stats().Requests["brave"]; n != 1 {
		t.Errorf("engine calls = %d, want 1", n)
	}
}
