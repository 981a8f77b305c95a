package fleet_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

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

// spendReport is usage.searchfleet, as every protocol reports it.
type spendReport struct {
	Searches       int     `json:"searches"`
	SearchesCached int     `json:"searches_cached"`
	Fetches        int     `json:"fetches"`
	FetchesCached  int     `json:"fetches_cached"`
	SearchCostUSD  float64 `json:"search_cost_usd"`
	ModelCostUSD   float64 `json:"model_cost_usd"`
	CostUSD        float64 `json:"cost_usd"`
}

func readSpend(t *testing.T, what, raw string) spendReport {
	t.Helper()
	var s spendReport
	if err := json.Unmarshal([]byte(raw), &s); err != nil || raw == "" {
		t.Errorf("%s: usage.searchfleet %q: %v", what, raw, err)
	}
	return s
}

// pricedBrave prices brave at $0.01 a search.
func pricedBrave(file *config.File) {
	price := 0.01
	for i, e := range file.WebSearch.Engines {
		if e.ID == "brave" {
			file.WebSearch.Engines[i].CostPerSearchUSD = &price
		}
	}
}

// A request's max_cost_usd and a batch's metadata.max_cost_usd stop paid searches at
// the cap, across two fleet processes whose search workers race for them: $0.03 at
// $0.01 a search is exactly three searches, the rest read SEARCH_BUDGET_EXHAUSTED and
// every job still answers. Invalid caps are refused in each protocol's error shape.
func TestSpendCapsAcrossWorkers(t *testing.T) {
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
	pricedBrave(file)
	if err := file.Validate(); err != nil {
		t.Fatal(err)
	}
	urls := make([]string, 2)
	for i := range urls {
		urls[i], _ = fleettest.RunMetered(t, env, file, rdb, metrics.New())
	}
	store := fleettest.Store(t, rdb, prefix, env.NATSURL, "", 0)
	c := openai.NewClient(option.WithBaseURL(urls[0]+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0))

	// The request's cap: six parallel searches asked, three paid.
	resp, err := c.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: demo.Model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Search the web: weather today? sim:calls=6 sim:engine=brave")}},
		option.WithJSONSet("web_search_options", map[string]any{"max_cost_usd": 0.03}))
	if err != nil {
		t.Fatal(err)
	}
	if n := sim.Stats().Requests["brave"]; n != 3 {
		t.Errorf("paid searches = %d, want exactly 3 ($0.03 at $0.01)", n)
	}
	if s := readSpend(t, "chat", resp.Usage.JSON.ExtraFields["searchfleet"].Raw()); s.Searches != 3 || s.SearchCostUSD != 0.03 || s.CostUSD != 0.03 {
		t.Errorf("usage.searchfleet %+v, want 3 searches for $0.03", s)
	}
	job, err := store.Jobs.GetJob(t.Context(), strings.TrimPrefix(resp.ID, "chatcmpl-"))
	if err != nil || job.Status != state.Completed || strings.Count(string(job.Trace), "SEARCH_BUDGET_EXHAUSTED") != 3 ||
		!strings.Contains(string(job.Trace), "request's spending cap (max_cost_usd) of $0.03") {
		t.Errorf("job %v: status %s, trace %s", err, job.Status, job.Trace)
	}

	// The batch's cap spans its jobs, whichever process runs them.
	sim.Reset()
	a := batchClient{t: t, url: urls[1]}
	var qs []string
	for i := range 6 {
		qs = append(qs, fmt.Sprintf("Search the web: news about topic %d? sim:engine=brave", i))
	}
	status, body := a.do("POST", "/v1/batches", map[string]any{"queries": qs, "model": demo.Model, "metadata": map[string]string{"max_cost_usd": "0.03"}})
	if status != 200 {
		t.Fatalf("batch: %d %s", status, body)
	}
	var b batchObject
	json.Unmarshal(body, &b)
	b = a.waitBatch(b.ID, 30*time.Second)
	if b.Status != "completed" || b.RequestCounts.Completed != 6 {
		t.Errorf("batch %+v, want every job completed", b)
	}
	if n := sim.Stats().Requests["brave"]; n != 3 {
		t.Errorf("the batch paid %d searches, want exactly 3", n)
	}
	if usd, limit, err := store.Ledger.BatchSpendOf(t.Context(), b.ID); err != nil || usd != 0.03 || limit != 0.03 {
		t.Errorf("batch ledger $%v of $%v (%v)", usd, limit, err)
	}

	// Invalid caps: 400 in each protocol's shape, nothing created.
	_, err = c.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: demo.Model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
		option.WithJSONSet("web_search_options", map[string]any{"max_cost_usd": -1}))
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != 400 || oerr.Param != "web_search_options.max_cost_usd" {
		t.Errorf("chat with a negative cap: %v", err)
	}
	_, err = c.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}},
		option.WithJSONSet("tools.0.max_cost_usd", "cheap"))
	if !errors.As(err, &oerr) || oerr.StatusCode != 400 || !strings.Contains(oerr.Message, "max_cost_usd") {
		t.Errorf("responses with a cap that is no number: %v", err)
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(urls[0]), aoption.WithAPIKey("test"), aoption.WithMaxRetries(0))
	_, err = ac.Messages.New(ctx(t), anthropic.MessageNewParams{Model: anthropic.Model(demo.Model), MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}},
		aoption.WithJSONSet("tools.0.max_cost_usd", 0))
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 400 || !strings.Contains(aerr.RawJSON(), "invalid_request_error") || !strings.Contains(aerr.RawJSON(), "max_cost_usd") {
		t.Errorf("messages with a zero cap: %v", err)
	}
	status, body = a.do("POST", "/v1/batches", map[string]any{"queries": []string{"x?"}, "model": demo.Model, "metadata": map[string]string{"max_cost_usd": "free"}})
	if status != 400 || !strings.Contains(string(body), "metadata.max_cost_usd") {
		t.Errorf("batch with a cap that is no number: %d %s", status, body)
	}
}

// Every protocol reports the job's searches and what it cost, streamed or not:
// usage.searchfleet {searches, search_cost_usd, model_cost_usd, cost_usd}, read
// through the official SDKs (which keep it as an extra usage field), and Anthropic's
// usage.server_tool_use.web_search_requests. The model's turns are priced from the
// route's pricing and counted in the tenant's spend.
func TestSpendUsageEveryProtocol(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(file *config.File) {
		pricedBrave(file)
		m := file.Models[demo.Model]
		m.Pricing = &spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}
		file.Models[demo.Model] = m
	}))
	answers := askEveryProtocol(t, f, "Search the web: weather in Paris today? sim:engine=brave")
	for _, a := range answers {
		if s := a.spend; s.Searches != 1 || s.SearchesCached != 0 || s.SearchCostUSD != 0.01 || s.ModelCostUSD <= 0 || s.CostUSD != roundMicro(s.SearchCostUSD+s.ModelCostUSD) {
			t.Errorf("%s: usage.searchfleet %+v, want 1 search at $0.01 plus the model's turns", a.what, s)
		}
		if a.what == "messages" && !strings.Contains(a.body, `"web_search_requests":1`) {
			t.Errorf("messages: usage.server_tool_use.web_search_requests is not 1: %s", a.body)
		}
	}

	// The tenant's ledger holds the jobs' searches and model turns.
	n := len(answers)
	sp, err := f.Store.Ledger.SpendOf(t.Context(), "default", time.Now()) // the open API's tenant
	if err != nil || sp.DaySearches != int64(n) || sp.DayUSD <= 0.01*float64(n) {
		t.Errorf("tenant spend %+v (%v), want %d searches and more than $%.2f with the model's turns", sp, err, n, 0.01*float64(n))
	}
}

func roundMicro(v float64) float64 { return float64(int64(v*1e6+0.5)) / 1e6 }
