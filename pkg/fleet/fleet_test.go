package fleet_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// events reads a job's event stream to its terminal event and returns the types.
func events(t *testing.T, f *fleettest.Fleet, id string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", f.URL+"/v1/jobs/"+id+"/events", nil)
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	var types []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			types = append(types, v)
		}
	}
	return types
}

func jobID(t *testing.T, resp map[string]any) string {
	t.Helper()
	sf, _ := resp["searchfleet"].(map[string]any)
	id, _ := sf["job_id"].(string)
	if id == "" {
		t.Fatalf("response has no job id: %v", resp)
	}
	return id
}

// A question that needs the web goes through the whole fleet and comes back as one
// answer citing the search results, with the lifecycle the issue names.
func TestChatWithSearchCitesSources(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, resp := f.Chat(t, searchPrompt)
	if status != 200 {
		t.Fatalf("status %d: %v", status, resp)
	}
	content := fleettest.Content(resp)
	if !strings.Contains(content, "[1]") || !strings.Contains(content, searchQuote) {
		t.Fatalf("answer does not cite [1] or quote the page about the question: %q", content)
	}
	msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	anns, _ := msg["annotations"].([]any)
	if len(anns) == 0 {
		t.Fatal("no url_citation annotations")
	}
	first := anns[0].(map[string]any)["url_citation"].(map[string]any)
	if u, _ := first["url"].(string); !strings.HasPrefix(u, "https://") || !strings.Contains(u, "/search-the-web-who-won-the-2022-world-cup") {
		t.Errorf("annotation url %q", u)
	}
	runes := []rune(content)
	start, end := int(first["start_index"].(float64)), int(first["end_index"].(float64))
	if got := string(runes[start:end]); !strings.HasPrefix(got, "[") {
		t.Errorf("annotation span %d..%d = %q, want a marker", start, end, got)
	}
	if fr := resp["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "stop" {
		t.Errorf("finish_reason %v", fr)
	}
	got := events(t, f, jobID(t, resp))
	want := []string{"queued", "model_call", "search_requested", "search_done", "model_call", "completed"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	st := f.Sim.Stats()
	if st.Requests["model"] != 2 || st.Requests["gemini"] != 1 || st.Duplicates["model"] != 0 {
		t.Errorf("simulator saw %v (dups %v); want 2 model calls and 1 search", st.Requests, st.Duplicates)
	}
}

// POST /v1/jobs answers 202 at once; GET /v1/jobs/{id} later shows the same answer
// the synchronous endpoint gives.
func TestAsyncJob(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, body, hdr := f.Do(t, "POST", "/v1/jobs", map[string]any{
		"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "Find the latest news about AI"}},
	})
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %s", status, body)
	}
	var job map[string]any
	json.Unmarshal(body, &job)
	id, _ := job["id"].(string)
	if job["status"] != "queued" || hdr.Get("Location") != "/v1/jobs/"+id {
		t.Fatalf("202 body %s, Location %q", body, hdr.Get("Location"))
	}
	var got map[string]any
	fleettest.Eventually(t, "job completed", func() bool {
		_, b, _ := f.Do(t, "GET", "/v1/jobs/"+id, nil)
		json.Unmarshal(b, &got)
		return got["status"] == "completed"
	})
	resp := got["response"].(map[string]any)
	if c := fleettest.Content(resp); !strings.Contains(c, "[1]") {
		t.Fatalf("job answer does not cite: %q", c)
	}
	trace, _ := got["trace"].([]any)
	if len(trace) != 1 || trace[0].(map[string]any)["engine"] != "google" {
		t.Errorf("trace %v", got["trace"])
	}
	// The synchronous answer to the same question has the same text.
	_, sync := f.Chat(t, "Find the latest news about AI")
	if fleettest.Content(sync) != fleettest.Content(resp) {
		t.Errorf("async answer %q differs from sync answer %q", fleettest.Content(resp), fleettest.Content(sync))
	}
}

func apiError(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error["message"] == "" {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	return e.Error
}

// Bad input gets a clear error in OpenAI's shape with the right status.
func TestBadInput(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.MaxBodyBytes = 1 << 20 }))
	big := bytes.Repeat([]byte("a"), 20<<20)
	cases := []struct {
		name   string
		body   any
		status int
		param  string
		code   string
	}{
		{"invalid JSON", `{"model": "sim-model", "messages": [`, 400, "", ""},
		{"not an object", `[1,2,3]`, 400, "", ""},
		{"missing messages", map[string]any{"model": demo.Model}, 400, "messages", ""},
		{"empty messages", map[string]any{"model": demo.Model, "messages": []any{}}, 400, "messages", ""},
		{"bad role", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "wizard", "content": "x"}}}, 400, "messages[0].role", ""},
		{"missing model", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}}, 400, "model", ""},
		{"unknown model", map[string]any{"model": "gpt-17", "messages": []any{map[string]any{"role": "user", "content": "x"}}}, 404, "model", "model_not_found"},
		{"bad tools", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "x"}}, "tools": []any{map[string]any{"type": "retrieval"}}}, 400, "tools[0]", ""},
		{"20 MB body", append(append([]byte(`{"model":"sim-model","messages":[{"role":"user","content":"`), big...), []byte(`"}]}`)...), 413, "", "request_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := f.Do(t, "POST", "/v1/chat/completions", c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, body)
			}
			e := apiError(t, body)
			if c.param != "" && e["param"] != c.param {
				t.Errorf("param %v, want %q", e["param"], c.param)
			}
			if c.code != "" && e["code"] != c.code {
				t.Errorf("code %v, want %q", e["code"], c.code)
			}
			if e["type"] == "" {
				t.Error("no error type")
			}
		})
	}
	if st := f.Sim.Stats(); st.Requests["model"] != 0 {
		t.Errorf("rejected requests reached the model %d times", st.Requests["model"])
	}
}

// A malformed web_search argument string from the model is returned to the model as
// an error it can read, and the job still ends with an answer.
func TestMalformedToolArgumentsReachTheModel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, c := range []struct{ directive, errType string }{
		{"sim:badargs", "INVALID_TOOL_ARGUMENTS"},
		{"sim:badkey", "INVALID_TOOL_ARGUMENTS"},
		{"sim:emptyquery", "INVALID_QUERY"},
		{"sim:engine=nosuchengine", "INVALID_ENGINE"},
	} {
		status, resp := f.Chat(t, "Search the web for the news "+c.directive)
		if status != 200 {
			t.Fatalf("%s: status %d %v", c.directive, status, resp)
		}
		if got := fleettest.Content(resp); !strings.Contains(got, "failed") {
			t.Errorf("%s: the model did not see a failed search: %q", c.directive, got)
		}
		job, err := f.Store.Jobs.GetJob(t.Context(), jobID(t, resp))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(job.Trace), c.errType) {
			t.Errorf("%s: trace %s lacks %s", c.directive, job.Trace, c.errType)
		}
	}
	if st := f.Sim.Stats(); st.Requests["gemini"] != 0 {
		t.Errorf("rejected calls reached an engine: %v", st.Requests)
	}
}

// An engine that answers 429 twice is retried after its Retry-After and the job
// completes; one that refuses the key becomes an error the model reads.
func TestEngineFailures(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	f.Sim.SetFault("/gemini", 429, 200*time.Millisecond, 2)
	status, resp := f.Chat(t, "Search the web: weather today?")
	if status != 200 || !strings.Contains(fleettest.Content(resp), "[1]") {
		t.Fatalf("after 429s: %d %q", status, fleettest.Content(resp))
	}
	if n := f.Sim.Stats().Requests["gemini"]; n != 3 {
		t.Errorf("engine called %d times, want 3 (two 429s, one success)", n)
	}
	status, resp = f.Chat(t, "Search the web: weather today? sim:401")
	if status != 200 {
		t.Fatalf("auth failure failed the job: %d %v", status, resp)
	}
	if c := fleettest.Content(resp); !strings.Contains(c, "failed") {
		t.Errorf("the model was not told the search failed: %q", c)
	}
	if n := f.Sim.Stats().Requests["gemini"]; n != 4 {
		t.Errorf("an auth failure was retried: engine calls %d, want 4", n)
	}
}

// A model that fails with 500 is retried; one that refuses the request the fleet made
// for it fails the job with a 502 in the fleet's words, not the provider's.
func TestModelFailures(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	f.Sim.SetFault("/v1/chat", 500, 0, 1)
	status, resp := f.Chat(t, "hello there, no search needed")
	if status != 200 {
		t.Fatalf("after one 500: %d %v", status, resp)
	}
	f.Sim.SetFault("/v1/chat", 400, 0, 1)
	status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "hi again"}}})
	if status != http.StatusBadGateway || strings.Contains(string(body), "simulated") {
		t.Fatalf("model 400 gave %d: %s", status, body)
	}
	apiError(t, body)
}

// Client-defined tools are never run by the fleet: their calls come back untouched.
func TestClientToolCallsReturnedUntouched(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "get_stock", "parameters": map[string]any{"type": "object"}}}
	status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{
		"model": demo.Model, "tools": []any{tool},
		"messages": []any{map[string]any{"role": "user", "content": "search the web news sim:tool=get_stock"}},
	})
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp map[string]any
	json.Unmarshal(body, &resp)
	choice := resp["choices"].([]any)[0].(map[string]any)
	calls, _ := choice["message"].(map[string]any)["tool_calls"].([]any)
	if choice["finish_reason"] != "tool_calls" || len(calls) != 1 {
		t.Fatalf("choice %v", choice)
	}
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "get_stock" || !strings.Contains(fn["arguments"].(string), "sim:tool=get_stock") {
		t.Errorf("client call changed: %v", fn)
	}
	if n := f.Sim.Stats().Requests["gemini"]; n != 0 {
		t.Errorf("searched %d times for a client tool call", n)
	}
}

// Parallel calls in one hop and several hops in one job: every search runs once and
// the sources are numbered across the whole chain.
func TestParallelCallsAndHops(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, resp := f.Chat(t, "Search the web: weather today? sim:calls=3 sim:engine=brave")
	if status != 200 {
		t.Fatalf("%d %v", status, resp)
	}
	if n := f.Sim.Stats().Requests["brave"]; n != 3 {
		t.Errorf("3 parallel calls made %d searches", n)
	}
	status, resp = f.Chat(t, "Search the web: weather today? sim:hops=3 sim:engine=tavily")
	if status != 200 {
		t.Fatalf("%d %v", status, resp)
	}
	sf := resp["searchfleet"].(map[string]any)
	if sf["hops"].(float64) != 4 || sf["searches"].(float64) != 3 {
		t.Errorf("hops/searches = %v/%v, want 4/3", sf["hops"], sf["searches"])
	}
	if d := f.Sim.Stats().Duplicates; d["model"] != 0 || d["tavily"] != 0 {
		t.Errorf("duplicate paid calls: %v", d)
	}
}

// The hop limit stops a model that keeps searching: the last hop is offered no
// web_search and has to answer.
func TestHopLimit(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.MaxHops = 3 }))
	status, resp := f.Chat(t, "Search the web: weather today? sim:hops=10")
	if status != 200 {
		t.Fatalf("%d %v", status, resp)
	}
	sf := resp["searchfleet"].(map[string]any)
	if sf["hops"].(float64) != 3 || sf["searches"].(float64) != 2 {
		t.Errorf("hops/searches = %v/%v, want 3/2", sf["hops"], sf["searches"])
	}
}

// Cancelling a running job stops it: no further paid calls.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, body, _ := f.Do(t, "POST", "/v1/jobs", map[string]any{"model": demo.Model,
		"messages": []any{map[string]any{"role": "user", "content": "Search the web: weather? sim:slow=1500ms"}}})
	if status != 202 {
		t.Fatalf("%d %s", status, body)
	}
	var job map[string]any
	json.Unmarshal(body, &job)
	id := job["id"].(string)
	fleettest.Eventually(t, "search requested", func() bool { return f.Sim.Stats().Requests["gemini"] == 1 })
	status, body, _ = f.Do(t, "POST", "/v1/jobs/"+id+"/cancel", nil)
	if status != 200 {
		t.Fatalf("cancel: %d %s", status, body)
	}
	time.Sleep(2500 * time.Millisecond) // let the slow search finish and its result arrive
	j, _ := f.Store.Jobs.GetJob(t.Context(), id)
	if j.Status != state.Cancelled {
		t.Fatalf("status %s after cancel", j.Status)
	}
	if n := f.Sim.Stats().Requests["model"]; n != 1 {
		t.Errorf("model called %d times; the cancelled job must not resume", n)
	}
	if status, _, _ := f.Do(t, "POST", "/v1/jobs/"+id+"/cancel", nil); status != 409 {
		t.Errorf("second cancel: %d, want 409", status)
	}
}

// GET /v1/jobs/{id} for a job that does not exist is a 404 in the API's shape.
func TestUnknownJob(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, p := range []string{"/v1/jobs/job_nosuchjob", "/v1/jobs/..%2f..", "/v1/jobs/job_nosuchjob/events"} {
		status, body, _ := f.Do(t, "GET", p, nil)
		if status != 404 {
			t.Errorf("%s: %d %s", p, status, body)
			continue
		}
		apiError(t, body)
	}
}

// Direct search: one normalized result through the search workers, no model.
func TestDirectSearch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, body, _ := f.Do(t, "POST", "/v1/search", map[string]any{"query": "go generics", "engine": "brave", "count": 3})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var r struct {
		Result struct {
			Engine string `json:"engine"`
			Hits   []any  `json:"hits"`
		} `json:"result"`
	}
	json.Unmarshal(body, &r)
	if r.Result.Engine != "brave" || len(r.Result.Hits) != 3 {
		t.Fatalf("result %s", body)
	}
	if n := f.Sim.Stats().Requests["model"]; n != 0 {
		t.Errorf("direct search called the model %d times", n)
	}
	status, body, _ = f.Do(t, "POST", "/v1/search", map[string]any{"query": "  "})
	if status != 400 || apiError(t, body)["code"] != "INVALID_QUERY" {
		t.Errorf("blank query: %d %s", status, body)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if status, body, _ := f.Do(t, "GET", p, nil); status != 200 {
			t.Errorf("%s: %d %s", p, status, body)
		}
	}
	f.Chat(t, "Search the web: weather today?")
	want := []string{`fleet_jobs_total{status="completed"} 1`, `fleet_searches_total{engine="google",outcome="ok"} 1`, `fleet_model_calls_total{outcome="ok",provider="sim"} 2`}
	// A job is counted by the finisher, from its terminal event: it may come a moment
	// after the answer.
	var missing []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body, _ := f.Do(t, "GET", "/metrics", nil)
		if status != 200 {
			t.Fatalf("/metrics %d", status)
		}
		missing = missing[:0]
		for _, m := range want {
			if !strings.Contains(string(body), m) {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range missing {
		t.Errorf("/metrics lacks %s", m)
	}
}
