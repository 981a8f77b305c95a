package fleet_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
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
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// costReport is usage.searchfleet with its counts of searches and fetches by how they
// were answered.
type costReport struct {
	Searches       int     `json:"searches"`
	SearchesCached int     `json:"searches_cached"`
	Fetches        int     `json:"fetches"`
	FetchesCached  int     `json:"fetches_cached"`
	SearchCostUSD  float64 `json:"search_cost_usd"`
	CostUSD        float64 `json:"cost_usd"`
}

func readCost(t *testing.T, what, raw string) costReport {
	t.Helper()
	var c costReport
	if err := json.Unmarshal([]byte(raw), &c); err != nil || raw == "" {
		t.Errorf("%s: usage.searchfleet %q: %v", what, raw, err)
	}
	return c
}

// sameCost checks that an answer's headers say what its body's usage.searchfleet says.
func sameCost(t *testing.T, what string, h http.Header, c costReport) {
	t.Helper()
	usd, err := strconv.ParseFloat(h.Get("X-Searchfleet-Cost-Usd"), 64)
	if err != nil || usd != c.CostUSD {
		t.Errorf("%s: X-Searchfleet-Cost-Usd %q, body cost_usd %v", what, h.Get("X-Searchfleet-Cost-Usd"), c.CostUSD)
	}
	for name, n := range map[string]int{"Searches": c.Searches, "Searches-Cached": c.SearchesCached, "Fetches": c.Fetches, "Fetches-Cached": c.FetchesCached} {
		if got := h.Get("X-Searchfleet-" + name); got != strconv.Itoa(n) {
			t.Errorf("%s: X-Searchfleet-%s %q, body says %d", what, name, got, n)
		}
	}
}

// call sends a JSON request and returns the status, headers and body.
func call(t *testing.T, method, url string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(ctx(t), method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// Every answer says what it cost and how its searches were answered, in every protocol:
// with brave's results cached, the first question pays its search and every later
// one (Chat, Responses and Messages, whole and streamed) reads it from the cache:
// usage.searchfleet says searches 0, searches_cached 1 and no search cost, through the
// official SDKs. A non-streamed answer's X-Searchfleet-Cost-Usd and count headers
// equal its body's usage.searchfleet; a streamed answer has the cost in its last
// event (Chat's last chunk, without stream_options too; response.completed;
// message_delta). POST /v1/search and GET /v1/jobs/{id} carry the same headers.
func TestCostHeadersAndCachedUsage(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(file *config.File) {
		pricedBrave(file)
		for i, e := range file.WebSearch.Engines {
			if e.ID == "brave" {
				file.WebSearch.Engines[i].CacheTTL = config.Duration(time.Hour)
			}
		}
		m := file.Models[demo.Model]
		m.Pricing = &state.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}
		file.Models[demo.Model] = m
	}))
	const prompt = "Search the web: tide times in Brest today? sim:engine=brave"
	cached := func(what string, c costReport) {
		t.Helper()
		if c.Searches != 0 || c.SearchesCached != 1 || c.SearchCostUSD != 0 || c.CostUSD <= 0 {
			t.Errorf("%s: usage.searchfleet %+v, want the search from the cache (searches 0, searches_cached 1) and the model's turns", what, c)
		}
	}

	c := openaiClient(f)
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}
	var hr *http.Response
	resp, err := c.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: demo.Model, Messages: user}, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	paid := readCost(t, "chat", resp.Usage.JSON.ExtraFields["searchfleet"].Raw())
	if paid.Searches != 1 || paid.SearchesCached != 0 || paid.SearchCostUSD != 0.01 {
		t.Errorf("chat: usage.searchfleet %+v, want the first search paid", paid)
	}
	sameCost(t, "chat", hr.Header, paid)
	job := strings.TrimPrefix(resp.ID, "chatcmpl-")

	resp, err = c.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: demo.Model, Messages: user}, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	again := readCost(t, "chat again", resp.Usage.JSON.ExtraFields["searchfleet"].Raw())
	cached("chat again", again)
	sameCost(t, "chat again", hr.Header, again)

	// A Chat stream without stream_options: one chunk, the last with a choice, has usage.
	st := c.Chat.Completions.NewStreaming(ctx(t), openai.ChatCompletionNewParams{Model: demo.Model, Messages: user})
	raw, withUsage, last := "", 0, ""
	for st.Next() {
		ch := st.Current()
		last = ch.RawJSON()
		if f, ok := ch.Usage.JSON.ExtraFields["searchfleet"]; ok {
			raw, withUsage = f.Raw(), withUsage+1
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if withUsage != 1 || !strings.Contains(last, `"searchfleet"`) || !strings.Contains(last, `"finish_reason":"stop"`) {
		t.Errorf("chat stream: %d chunks with usage, last chunk %s", withUsage, last)
	}
	cached("chat stream", readCost(t, "chat stream", raw))

	input := responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}
	rr, err := c.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Input: input}, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	rc := readCost(t, "responses", rr.Usage.JSON.ExtraFields["searchfleet"].Raw())
	cached("responses", rc)
	sameCost(t, "responses", hr.Header, rc)
	rs := c.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{Model: demo.Model, Input: input})
	raw = ""
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.completed" {
			raw = ev.Response.Usage.JSON.ExtraFields["searchfleet"].Raw()
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	cached("responses stream", readCost(t, "responses stream", raw))

	ac := anthropicClient(f)
	params := anthropic.MessageNewParams{Model: anthropic.Model(demo.Model), MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}}
	msg, err := ac.Messages.New(ctx(t), params, aoption.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	mc := readCost(t, "messages", msg.Usage.JSON.ExtraFields["searchfleet"].Raw())
	cached("messages", mc)
	sameCost(t, "messages", hr.Header, mc)
	ms := ac.Messages.NewStreaming(ctx(t), params)
	raw = ""
	for ms.Next() {
		if ev := ms.Current(); ev.Type == "message_delta" {
			raw = ev.Usage.JSON.ExtraFields["searchfleet"].Raw()
		}
	}
	if err := ms.Err(); err != nil {
		t.Fatal(err)
	}
	cached("messages stream", readCost(t, "messages stream", raw))

	// A job's record: the same headers as its usage and its answer's usage.searchfleet.
	status, h, body := call(t, "GET", f.URL+"/v1/jobs/"+job, nil)
	var view struct {
		Usage    costReport `json:"usage"`
		Response struct {
			Usage struct {
				Searchfleet costReport `json:"searchfleet"`
			} `json:"usage"`
		} `json:"response"`
	}
	if status != 200 || json.Unmarshal(body, &view) != nil || view.Usage != paid || view.Response.Usage.Searchfleet != paid {
		t.Errorf("GET /v1/jobs/%s: %d, usage %+v and answer's %+v, want %+v", job, status, view.Usage, view.Response.Usage.Searchfleet, paid)
	}
	sameCost(t, "GET /v1/jobs", h, view.Usage)

	// A direct search: paid, then from the cache; the headers are its result's usage.
	for i, want := range []struct{ searches, cached int }{{1, 0}, {0, 1}} {
		status, h, body := call(t, "POST", f.URL+"/v1/search", map[string]any{"query": "lighthouses of Finistère", "engine": "brave"})
		var out struct {
			Result struct {
				Usage struct {
					Searches int     `json:"searches"`
					Cached   int     `json:"cached"`
					CostUSD  float64 `json:"cost_usd"`
				} `json:"usage"`
			} `json:"result"`
		}
		u := &out.Result.Usage
		if status != 200 || json.Unmarshal(body, &out) != nil || u.Searches != want.searches || u.Cached != want.cached {
			t.Fatalf("search %d: %d %s, want %d paid and %d cached", i, status, body, want.searches, want.cached)
		}
		sameCost(t, "POST /v1/search", h, costReport{Searches: u.Searches, SearchesCached: u.Cached, CostUSD: u.CostUSD})
	}
	if n := f.Sim.Stats().Requests["brave"]; n != 2 {
		t.Errorf("brave was searched %d times, want twice (one question, one direct search): the rest from the cache", n)
	}
}
