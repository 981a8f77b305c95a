package fleet_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/spend"
)

// A model turn is reserved at its worst case before the model is called, so a dollar
// budget stops model spend, not only searches: 30 concurrent priced chats (about $0.006
// a turn, $0.18 together) against a $0.05 daily budget, on two fleet processes, spend at
// most $0.05 in the simulator's own count; every other request is refused with a
// budget error (429 insufficient_quota) and costs no model call. A request's
// max_cost_usd stops a chain of turns the same way.
func TestModelSpendStopsAtTheBudget(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = bustest.Server(t), prefix
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	pricing := spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}
	m := file.Models[demo.Model]
	m.Pricing = &pricing
	file.Models[demo.Model] = m
	pricedBrave(file)
	const key, capKey = "turn-budget-key", "turn-cap-key"
	file.Tenants = []config.Tenant{
		{ID: "acme", APIKeyEnv: "TURNBUDGET_KEY", APIKeys: []string{key}, Budget: &spend.Budget{USDPerDay: 0.05}},
		{ID: "capped", APIKeyEnv: "TURNBUDGET_KEY2", APIKeys: []string{capKey}},
	}
	if err := file.Validate(); err != nil {
		t.Fatal(err)
	}
	urls := make([]string, 2)
	for i := range urls {
		urls[i], _ = fleettest.RunMetered(t, env, file, rdb, metrics.New())
	}
	store := fleettest.Store(t, rdb, prefix, env.NATSURL, "", 0)
	padding := strings.Repeat("lorem ipsum ", 700) // ~8 KB: ~2,000 prompt tokens, ~$0.006 a turn
	chat := func(url, k, text string, extra map[string]any) (int, []byte) {
		body := map[string]any{"model": demo.Model, "max_tokens": 100,
			"messages": []any{map[string]any{"role": "user", "content": text + " " + padding}}}
		for k, v := range extra {
			body[k] = v
		}
		status, out, _ := budgetCall(t, url, "/v1/chat/completions", k, body)
		return status, out
	}
	type spend struct {
		ModelCostUSD float64 `json:"model_cost_usd"`
		CostUSD      float64 `json:"cost_usd"`
	}
	costOf := func(body []byte) float64 {
		var resp struct {
			Usage struct {
				Searchfleet spend `json:"searchfleet"`
			} `json:"usage"`
		}
		json.Unmarshal(body, &resp)
		return resp.Usage.Searchfleet.CostUSD
	}

	const n = 30
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		spent    float64
		answered int
		refused  []string
	)
	for i := range n {
		wg.Go(func() {
			status, body := chat(urls[i%2], key, fmt.Sprintf("hello %d sim:nosearch", i), nil)
			mu.Lock()
			defer mu.Unlock()
			switch status {
			case http.StatusOK:
				answered++
				spent += costOf(body)
			case http.StatusTooManyRequests:
				refused = append(refused, string(body))
			default:
				t.Errorf("chat %d: %d %s", i, status, body)
			}
		})
	}
	wg.Wait()
	calls := sim.Stats().Requests["model"]
	t.Logf("%d answered for $%.6f, %d refused, %d model calls", answered, spent, len(refused), calls)
	if spent > 0.05+1e-9 {
		t.Errorf("the answered chats spent $%.6f against a $0.05 daily budget", spent)
	}
	if int(calls) != answered {
		t.Errorf("the model was called %d times for %d answers: a refused request must cost no model call", calls, answered)
	}
	if answered == 0 || len(refused) == 0 {
		t.Errorf("answered %d, refused %d: want both", answered, len(refused))
	}
	for _, body := range refused {
		if !strings.Contains(body, "insufficient_quota") || !strings.Contains(body, "daily spending budget of $0.05") {
			t.Errorf("refusal %s, want an insufficient_quota error naming the budget", body)
			break
		}
	}
	sp, err := store.Ledger.SpendOf(t.Context(), "acme", time.Now())
	if err != nil || sp.DayUSD > 0.05+1e-9 || sp.DayUSD < spent-1e-6 {
		t.Errorf("tenant ledger %+v (%v), want the answered turns' $%.6f, at most $0.05", sp, err, spent)
	}

	// max_cost_usd: a chain of five searches and six turns (about $0.04 of turns) under
	// a $0.02 cap stops when the next turn's worst case no longer fits.
	status, body, hdr := budgetCall(t, urls[0], "/v1/chat/completions", capKey, map[string]any{"model": demo.Model, "max_tokens": 100,
		"web_search_options": map[string]any{"max_cost_usd": 0.02},
		"messages":           []any{map[string]any{"role": "user", "content": "Search the web: weather today? sim:hops=5 sim:engine=brave " + padding}}})
	// What the job spent is read from its tenant's ledger, which only this job uses:
	// the job's own ledger is dropped when its ended record is archived, which may
	// happen before this read.
	id := hdr.Get("X-Searchfleet-Job-Id")
	sp, err = store.Ledger.SpendOf(t.Context(), "capped", time.Now())
	t.Logf("capped chain: %d %s; the tenant's ledger $%v", status, clip(body), sp.DayUSD)
	if err != nil || id == "" || sp.DayUSD > 0.02+1e-9 || sp.DayUSD < 0.01 {
		t.Errorf("job %q spent $%v (%v), want what it spent, at most the $0.02 cap", id, sp.DayUSD, err)
	}
	switch {
	case status == http.StatusOK:
		if c := costOf(body); c > 0.02+1e-9 {
			t.Errorf("the capped request reports $%v spent", c)
		}
	case status != http.StatusTooManyRequests || !strings.Contains(string(body), "max_cost_usd"):
		t.Errorf("capped chain: %d %s, want an answer or a budget error naming max_cost_usd", status, body)
	}
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// A batch's lines are charged to the tenant's storage quota as they are expanded, as
// submitted jobs are: with a 256 KiB quota and twelve lines of ~30 KB (each charged
// its request and a 64 KiB allowance until it ends), the lines that do not fit fail
// with storage_quota_exceeded instead of being kept, the batch still ends, and the
// tenant's records stay within its quota.
func TestBatchLinesChargedToTheStorageQuota(t *testing.T) {
	t.Parallel()
	const key = "quota-batch-key"
	f := fleettest.Start(t, fleettest.File(func(file *config.File) {
		file.Tenants = []config.Tenant{{ID: "small", APIKeyEnv: "QUOTABATCH_KEY", APIKeys: []string{key}, Limits: config.Limits{StorageBytes: 256 << 10}}}
	}))
	a := batchClient{t: t, url: f.URL, key: key}
	var qs []string
	for i := range 12 {
		qs = append(qs, fmt.Sprintf("hello %d sim:nosearch %s", i, strings.Repeat("z", 30<<10)))
	}
	status, body := a.do("POST", "/v1/batches", map[string]any{"queries": qs, "model": demo.Model})
	if status != 200 {
		t.Fatalf("batch: %d %s", status, clip(body))
	}
	var b batchObject
	json.Unmarshal(body, &b)
	b = a.waitBatch(b.ID, 60*time.Second)
	if b.RequestCounts.Total != 12 || b.RequestCounts.Failed == 0 || b.RequestCounts.Completed == 0 {
		t.Errorf("batch %+v, want some lines run and the rest failed on the quota", b)
	}
	st, err := f.Store.Ledger.StorageOf(t.Context(), "small")
	if err != nil || st.Used > 256<<10 {
		t.Errorf("tenant storage %+v (%v), want within its 256 KiB quota", st, err)
	}
	status, body = a.do("GET", "/v1/files/"+b.ErrorFileID+"/content", nil)
	if status != 200 || !strings.Contains(string(body), "storage_quota_exceeded") {
		t.Errorf("error file: %d %s", status, clip(body))
	}
}
