package fleet_test

import (
	"encoding/json"
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
	"github.com/searchfleet/searchfleet/pkg/spend"
)

// protocolAnswer is one answer's usage.searchfleet as an official SDK read it, with the
// answer's body and, for a non-streamed answer, its headers.
type protocolAnswer struct {
	what   string
	spend  spendReport
	body   string
	header http.Header
}

// sameCost checks that an answer's headers say what its body's usage.searchfleet says.
func sameCost(t *testing.T, what string, h http.Header, s spendReport) {
	t.Helper()
	usd, err := strconv.ParseFloat(h.Get("X-Searchfleet-Cost-Usd"), 64)
	if err != nil || usd != s.CostUSD {
		t.Errorf("%s: X-Searchfleet-Cost-Usd %q, body cost_usd %v", what, h.Get("X-Searchfleet-Cost-Usd"), s.CostUSD)
	}
	for name, n := range map[string]int{"Searches": s.Searches, "Searches-Cached": s.SearchesCached, "Fetches": s.Fetches, "Fetches-Cached": s.FetchesCached} {
		if got := h.Get("X-Searchfleet-" + name); got != strconv.Itoa(n) {
			t.Errorf("%s: X-Searchfleet-%s %q, body says %d", what, name, got, n)
		}
	}
}

// askEveryProtocol asks prompt through the official SDKs in every protocol, whole and
// streamed, and returns each answer's usage.searchfleet. It checks that a whole
// answer's X-Searchfleet-Cost-Usd and count headers equal its body's
// usage.searchfleet, and that a stream has it in its last event: Chat's usage chunk
// (stream_options.include_usage) or, without one, its last chunk, one chunk only
// carrying usage; response.completed; message_delta.
func askEveryProtocol(t *testing.T, f *fleettest.Fleet, prompt string) []protocolAnswer {
	t.Helper()
	var out []protocolAnswer
	var hr *http.Response
	whole := func(what, usage, body string) {
		t.Helper()
		a := protocolAnswer{what: what, spend: readSpend(t, what, usage), body: body, header: hr.Header}
		sameCost(t, what, a.header, a.spend)
		out = append(out, a)
	}
	streamed := func(what, usage string) {
		t.Helper()
		out = append(out, protocolAnswer{what: what, spend: readSpend(t, what, usage)})
	}

	c := openaiClient(f)
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}
	resp, err := c.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: demo.Model, Messages: user}, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	whole("chat", resp.Usage.JSON.ExtraFields["searchfleet"].Raw(), resp.RawJSON())
	for _, opts := range []openai.ChatCompletionStreamOptionsParam{{IncludeUsage: openai.Bool(true)}, {}} {
		what := "chat stream with include_usage"
		if !opts.IncludeUsage.Value {
			what = "chat stream"
		}
		st := c.Chat.Completions.NewStreaming(ctx(t), openai.ChatCompletionNewParams{Model: demo.Model, Messages: user, StreamOptions: opts})
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
		if withUsage != 1 || !strings.Contains(last, `"searchfleet"`) {
			t.Errorf("%s: %d chunks with usage, last chunk %s", what, withUsage, last)
		}
		streamed(what, raw)
	}

	input := responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}
	rr, err := c.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Input: input}, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	whole("responses", rr.Usage.JSON.ExtraFields["searchfleet"].Raw(), rr.RawJSON())
	rs := c.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{Model: demo.Model, Input: input})
	raw := ""
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.completed" {
			raw = ev.Response.Usage.JSON.ExtraFields["searchfleet"].Raw()
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	streamed("responses stream", raw)

	ac := anthropicClient(f)
	params := anthropic.MessageNewParams{Model: anthropic.Model(demo.Model), MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}}
	msg, err := ac.Messages.New(ctx(t), params, aoption.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	whole("messages", msg.Usage.JSON.ExtraFields["searchfleet"].Raw(), msg.RawJSON())
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
	streamed("messages stream", raw)
	return out
}

// With brave's results cached, the first question pays its search and every later
// answer, in every protocol, whole and streamed, reads it from the cache:
// usage.searchfleet says searches 0, searches_cached 1 and no search cost, and the
// headers say the same (askEveryProtocol), and again when GET /v1/responses/{id}
// reads the response. GET /v1/jobs/{id} carries the headers of the job's usage
// record, POST /v1/search those of its result's usage.
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
		m.Pricing = &spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}
		file.Models[demo.Model] = m
	}))
	const prompt = "Search the web: tide times in Brest today? sim:engine=brave"
	status, b, h := f.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": prompt}}})
	var first struct {
		ID    string `json:"id"`
		Usage struct {
			Searchfleet spendReport `json:"searchfleet"`
		} `json:"usage"`
	}
	paid := &first.Usage.Searchfleet
	if status != 200 || json.Unmarshal(b, &first) != nil || paid.Searches != 1 || paid.SearchesCached != 0 || paid.SearchCostUSD != 0.01 {
		t.Fatalf("first question: %d %s, want its search paid", status, b)
	}
	sameCost(t, "first question", h, *paid)

	for _, a := range askEveryProtocol(t, f, prompt) {
		if s := a.spend; s.Searches != 0 || s.SearchesCached != 1 || s.SearchCostUSD != 0 || s.CostUSD != s.ModelCostUSD || s.CostUSD <= 0 {
			t.Errorf("%s: usage.searchfleet %+v, want the search from the cache (searches 0, searches_cached 1) and the model's turns", a.what, s)
		}
		if a.what != "responses" {
			continue
		}
		// A stored response read again: the same headers as when it was answered.
		var r struct {
			ID string `json:"id"`
		}
		json.Unmarshal([]byte(a.body), &r)
		status, b, h := f.Do(t, "GET", "/v1/responses/"+r.ID, nil)
		if status != 200 || !strings.Contains(string(b), `"searches_cached":1`) {
			t.Errorf("GET /v1/responses/%s: %d %s", r.ID, status, b)
		}
		sameCost(t, "GET /v1/responses", h, a.spend)
	}

	// A job's record: the same headers as its usage and its answer's usage.searchfleet.
	job := strings.TrimPrefix(first.ID, "chatcmpl-")
	status, b, h = f.Do(t, "GET", "/v1/jobs/"+job, nil)
	var view struct {
		Usage    spendReport `json:"usage"`
		Response struct {
			Usage struct {
				Searchfleet spendReport `json:"searchfleet"`
			} `json:"usage"`
		} `json:"response"`
	}
	if status != 200 || json.Unmarshal(b, &view) != nil || view.Usage != *paid || view.Response.Usage.Searchfleet != *paid {
		t.Errorf("GET /v1/jobs/%s: %d, usage %+v and answer's %+v, want %+v", job, status, view.Usage, view.Response.Usage.Searchfleet, *paid)
	}
	sameCost(t, "GET /v1/jobs", h, view.Usage)

	// A direct search: paid, then from the cache; the headers are its result's usage.
	for i, want := range []struct{ searches, cached int }{{1, 0}, {0, 1}} {
		status, b, h := f.Do(t, "POST", "/v1/search", map[string]any{"query": "lighthouses of Finistère", "engine": "brave"})
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
		if status != 200 || json.Unmarshal(b, &out) != nil || u.Searches != want.searches || u.Cached != want.cached {
			t.Fatalf("search %d: %d %s, want %d paid and %d cached", i, status, b, want.searches, want.cached)
		}
		sameCost(t, "POST /v1/search", h, spendReport{Searches: u.Searches, SearchesCached: u.Cached, CostUSD: u.CostUSD})
	}
	if n := f.Sim.Stats().Requests["brave"]; n != 2 {
		t.Errorf("brave was searched %d times, want twice (one question, one direct search): the rest from the cache", n)
	}
}

// A direct fetch and a research run, asked for, polled and streamed through both
// their APIs, carry the cost headers too. POST /v1/fetch: one page read at no cost,
// as its job's usage record says. A completed run's GET /v1/research/{id}: its
// usage's cost_usd, searches and fetches. The same run read as a Response
// (responses.retrieve): its usage.searchfleet says the run's cost and counts and its
// headers the same, and its stream's response.completed carries that usage.
func TestCostHeadersOfFetchAndResearch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) {
		e.MaxFetches, e.FetchAllow, e.FetchTimeout = 5, []string{"127.0.0.0/8"}, 5*time.Second
	}), fleettest.File(func(file *config.File) {
		pricedBrave(file)
		m := file.Models[demo.Model]
		m.Pricing = &spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}
		file.Models[demo.Model] = m
	}))

	// A direct fetch: its headers are its job's usage record.
	status, b, h := f.Do(t, "POST", "/v1/fetch", map[string]any{"url": guidePage(t)})
	if status != 200 || !strings.Contains(string(b), `"fetch.result"`) {
		t.Fatalf("POST /v1/fetch: %d %s", status, b)
	}
	sameCost(t, "POST /v1/fetch", h, spendReport{Fetches: 1})
	job := h.Get("X-Searchfleet-Job-Id")
	status, b, jh := f.Do(t, "GET", "/v1/jobs/"+job, nil)
	var view struct {
		Usage spendReport `json:"usage"`
	}
	if status != 200 || json.Unmarshal(b, &view) != nil || view.Usage != (spendReport{Fetches: 1}) {
		t.Errorf("GET /v1/jobs/%s: %d %s, want one page read at no cost", job, status, b)
	}
	sameCost(t, "GET /v1/jobs of a fetch", jh, view.Usage)

	// A research run: no headers until it has completed, then its usage's.
	run := startResearch(t, f, map[string]any{"input": "Who built the Golden Gate Bridge? sim:engine=brave", "model": "research/" + demo.Model, "effort": "low"})
	if _, b, h := f.Do(t, "GET", "/v1/research/"+run.ID, nil); !strings.Contains(string(b), `"status":"completed"`) && h.Get("X-Searchfleet-Cost-Usd") != "" {
		t.Errorf("a run not yet completed has cost headers: %v", h)
	}
	run = waitResearch(t, f, run.ID, ended)
	status, b, h = f.Do(t, "GET", "/v1/research/"+run.ID, nil)
	var rv researchRun
	if status != 200 || json.Unmarshal(b, &rv) != nil || rv.Status != "completed" || rv.Usage.CostUSD <= 0 || rv.Usage.Searches == 0 {
		t.Fatalf("GET /v1/research/%s: %d %s, want a completed run that paid", run.ID, status, b)
	}
	want := spendReport{Searches: rv.Usage.Searches, Fetches: rv.Usage.Fetches, CostUSD: rv.Usage.CostUSD}
	sameCost(t, "GET /v1/research", h, want)

	// A run through the Responses API, retrieved when it has completed, then streamed.
	c := openaiClient(f)
	var hr *http.Response
	resp, err := c.Responses.New(ctx(t), researchParams("How do vaccines work? sim:engine=brave"), option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	if hr.Header.Get("X-Searchfleet-Cost-Usd") != "" {
		t.Errorf("a queued run's Response has cost headers: %v", hr.Header)
	}
	for deadline := time.Now().Add(90 * time.Second); resp.Status != responses.ResponseStatusCompleted; {
		if time.Now().After(deadline) || resp.Status == responses.ResponseStatusFailed {
			t.Fatalf("response %s: %s", resp.ID, resp.Status)
		}
		time.Sleep(100 * time.Millisecond)
		if resp, err = c.Responses.Get(ctx(t), resp.ID, responses.ResponseGetParams{}, option.WithResponseInto(&hr)); err != nil {
			t.Fatal(err)
		}
	}
	got := readSpend(t, "responses.retrieve of a run", resp.Usage.JSON.ExtraFields["searchfleet"].Raw())
	sameCost(t, "responses.retrieve of a run", hr.Header, got)
	rv = getResearch(t, f, resp.ID)
	if got.CostUSD != rv.Usage.CostUSD || got.Searches != rv.Usage.Searches || got.Fetches != rv.Usage.Fetches || got.CostUSD <= 0 {
		t.Errorf("responses.retrieve of a run: usage.searchfleet %+v, the run's usage %+v", got, rv.Usage)
	}
	st := c.Responses.GetStreaming(ctx(t), resp.ID, responses.ResponseGetParams{})
	raw := ""
	for st.Next() {
		if ev := st.Current(); ev.Type == "response.completed" {
			raw = ev.Response.Usage.JSON.ExtraFields["searchfleet"].Raw()
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if s := readSpend(t, "a run's stream", raw); s != got {
		t.Errorf("a run's response.completed: usage.searchfleet %+v, retrieve says %+v", s, got)
	}
}
