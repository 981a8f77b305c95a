package fleet_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// replayView is the part of a job the replay tests read.
type replayView struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	ReplayOf string `json:"replay_of"`
	Response struct {
		Searchfleet struct {
			Sources []struct {
				URL string `json:"url"`
			} `json:"sources"`
		} `json:"searchfleet"`
	} `json:"response"`
	Usage struct {
		Searches       int `json:"searches"`
		SearchesCached int `json:"searches_cached"`
		Fetches        int `json:"fetches"`
		FetchesCached  int `json:"fetches_cached"`
	} `json:"usage"`
	Trace []struct {
		Query   string `json:"query"`
		Engine  string `json:"engine"`
		Worker  string `json:"worker"`
		Result  string `json:"result"`
		Error   string `json:"error"`
		Sources []struct {
			URL string `json:"url"`
		} `json:"sources"`
	} `json:"trace"`
}

// sourceURLs lists the answer's sources, then every trace entry's, in order.
func (v replayView) sourceURLs() (answer, trace []string) {
	for _, s := range v.Response.Searchfleet.Sources {
		answer = append(answer, s.URL)
	}
	for _, e := range v.Trace {
		for _, s := range e.Sources {
			trace = append(trace, s.URL)
		}
	}
	return answer, trace
}

// engineRequests counts the simulator's requests to search engines (every route but
// the main model's).
func engineRequests(s simulator.Stats) int64 {
	var n int64
	for k, v := range s.Requests {
		if !strings.HasPrefix(k, "model") {
			n += v
		}
	}
	return n
}

// submitAndWait submits a chat job as client c and returns it once it has ended.
func submitAndWait(t *testing.T, c batchClient, text string) replayView {
	t.Helper()
	status, body := c.do("POST", "/v1/jobs", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": text}}})
	if status != 202 {
		t.Fatalf("submitting: %d %s", status, body)
	}
	var j replayView
	json.Unmarshal(body, &j)
	return waitJob(t, c, j.ID)
}

func waitJob(t *testing.T, c batchClient, id string) replayView {
	t.Helper()
	var j replayView
	fleettest.Eventually(t, "job "+id+" ends", func() bool {
		_, body := c.do("GET", "/v1/jobs/"+id, nil)
		j = replayView{}
		if err := json.Unmarshal(body, &j); err != nil {
			t.Fatalf("job is not JSON: %s", body)
		}
		return j.Status == "completed" || j.Status == "failed" || j.Status == "cancelled"
	})
	return j
}

// replay replays job id as c and returns the replay once it has ended.
func replay(t *testing.T, c batchClient, id string) replayView {
	t.Helper()
	status, body := c.do("POST", "/v1/jobs/"+id+"/replay", nil)
	if status != 202 {
		t.Fatalf("replaying: %d %s", status, body)
	}
	var j replayView
	json.Unmarshal(body, &j)
	if j.ID == "" || j.ID == id || j.ReplayOf != id {
		t.Fatalf("replay answer: %s", body)
	}
	return waitJob(t, c, j.ID)
}

// A replayed job makes no paid search, and yields the same sources in the same order,
// each result taken from the original's record under the same content address.
func TestReplayMakesNoPaidSearch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := batchClient{t: t, url: f.URL}
	orig := submitAndWait(t, c, "Search the web: what is new in Go today? sim:hops=2")
	if orig.Status != "completed" || len(orig.Trace) != 2 || orig.Usage.Searches != 2 {
		t.Fatalf("original: %+v", orig)
	}
	for _, e := range orig.Trace {
		if len(e.Result) != 64 || e.Error != "" || len(e.Sources) == 0 {
			t.Fatalf("original trace entry without a recorded result: %+v", e)
		}
	}
	paid := engineRequests(f.Sim.Stats())

	rep := replay(t, c, orig.ID)
	if got := engineRequests(f.Sim.Stats()); got != paid {
		t.Errorf("the replay made %d engine requests", got-paid)
	}
	if rep.Status != "completed" || rep.ReplayOf != orig.ID || rep.Usage.Searches != 0 || rep.Usage.SearchesCached != 2 || orig.Usage.SearchesCached != 0 {
		t.Fatalf("replay: %+v (original's usage %+v)", rep, orig.Usage)
	}
	oa, ot := orig.sourceURLs()
	ra, rt := rep.sourceURLs()
	if len(oa) == 0 || !slices.Equal(oa, ra) || !slices.Equal(ot, rt) {
		t.Errorf("sources differ:\noriginal %v / %v\nreplay   %v / %v", oa, ot, ra, rt)
	}
	if len(rep.Trace) != len(orig.Trace) {
		t.Fatalf("replay trace %+v", rep.Trace)
	}
	for i, e := range rep.Trace {
		if e.Worker != "replay" || e.Result != orig.Trace[i].Result || e.Query != orig.Trace[i].Query {
			t.Errorf("replay trace entry %d: %+v, original %+v", i, e, orig.Trace[i])
		}
	}

	// A replay of the replay answers from the replay's own record, still at no cost.
	again := replay(t, c, rep.ID)
	if got := engineRequests(f.Sim.Stats()); got != paid || again.Status != "completed" {
		t.Errorf("replaying the replay: %d engine requests, status %s", got-paid, again.Status)
	}
	if aa, _ := again.sourceURLs(); !slices.Equal(aa, oa) {
		t.Errorf("replay of the replay sources %v, want %v", aa, oa)
	}
}

// A tenant replays only its own jobs: another tenant's, or none, is 404.
func TestReplayTenants(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(c *config.File) {
		c.Tenants = []config.Tenant{{ID: "alice", APIKeyEnv: "REPLAYTEST_KEY_A", APIKeys: []string{"key-alice"}}, {ID: "bob", APIKeyEnv: "REPLAYTEST_KEY_B", APIKeys: []string{"key-bob"}}}
	}))
	alice, bob := batchClient{t: t, url: f.URL, key: "key-alice"}, batchClient{t: t, url: f.URL, key: "key-bob"}
	orig := submitAndWait(t, alice, "Search the web: what is new today?")
	paid := f.Sim.Stats().Requests["model"]
	for _, id := range []string{orig.ID, "job_doesnotexist"} {
		status, body := bob.do("POST", "/v1/jobs/"+id+"/replay", nil)
		if status != 404 || !strings.Contains(string(body), "job_not_found") {
			t.Errorf("bob replaying %s: %d %s", id, status, body)
		}
	}
	if got := f.Sim.Stats().Requests["model"]; got != paid {
		t.Errorf("a refused replay called the model %d times", got-paid)
	}
	if rep := replay(t, alice, orig.ID); rep.Status != "completed" {
		t.Errorf("alice's replay: %+v", rep)
	}

	// Only an ended chat job can be replayed: one still running is 409 (its searches
	// are still being recorded), a direct search 400.
	status, body := alice.do("POST", "/v1/jobs", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "Search the web: what is new? sim:model-hang"}}})
	var running replayView
	if json.Unmarshal(body, &running); status != 202 {
		t.Fatalf("submitting: %d %s", status, body)
	}
	if status, body := alice.do("POST", "/v1/jobs/"+running.ID+"/replay", nil); status != 409 || !strings.Contains(string(body), "job_not_finished") {
		t.Errorf("replaying a running job: %d %s", status, body)
	}
	alice.do("POST", "/v1/jobs/"+running.ID+"/cancel", nil)
	status, body = alice.do("POST", "/v1/search", map[string]any{"query": "go generics", "engine": "brave"})
	var direct struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &direct); status != 200 || direct.ID == "" {
		t.Fatalf("direct search: %d %s", status, body)
	}
	if status, body := alice.do("POST", "/v1/jobs/"+direct.ID+"/replay", nil); status != 400 || !strings.Contains(string(body), "job_not_replayable") {
		t.Errorf("replaying a direct search: %d %s", status, body)
	}
}

// A search the original job did not record — here because it failed (a failed search
// is never recorded) — gets SEARCH_NOT_RECORDED in the replay, never a paid search;
// the model answers with that.
func TestReplayUnrecordedSearch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := batchClient{t: t, url: f.URL}
	orig := submitAndWait(t, c, "Search the web: what is new today? sim:401")
	if orig.Status != "completed" || len(orig.Trace) != 1 || orig.Trace[0].Error == "" || orig.Trace[0].Result != "" {
		t.Fatalf("original: %+v", orig)
	}
	paid := engineRequests(f.Sim.Stats())
	rep := replay(t, c, orig.ID)
	if got := engineRequests(f.Sim.Stats()); got != paid {
		t.Errorf("the replay made %d engine requests", got-paid)
	}
	if rep.Status != "completed" || len(rep.Trace) != 1 || rep.Usage.Searches != 0 || rep.Usage.SearchesCached != 0 {
		t.Fatalf("replay: %+v", rep)
	}
	if e := rep.Trace[0]; !strings.HasPrefix(e.Error, "SEARCH_NOT_RECORDED") || !strings.Contains(e.Error, "only the original searches are available") || e.Worker != "replay" {
		t.Errorf("replay trace: %+v", e)
	}
}

// A job whose model repeats a search pays for it once: the repeat is answered from the
// job's record, and both trace entries point at the same recorded result.
func TestRepeatedSearchPaidOnce(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := batchClient{t: t, url: f.URL}
	before := engineRequests(f.Sim.Stats())
	j := submitAndWait(t, c, "Search the web: what is new in Rust today? sim:hops=2 sim:repeat-search")
	if got := engineRequests(f.Sim.Stats()) - before; got != 1 {
		t.Errorf("%d engine requests for one search made twice", got)
	}
	if j.Status != "completed" || len(j.Trace) != 2 || j.Usage.Searches != 1 || j.Usage.SearchesCached != 1 {
		t.Fatalf("job: %+v", j)
	}
	first, second := j.Trace[0], j.Trace[1]
	if first.Query != second.Query || first.Result == "" || second.Result != first.Result || second.Worker != "dedupe" || first.Worker == "dedupe" {
		t.Errorf("trace: %+v", j.Trace)
	}
}

// A replay whose model asks a search the original never made gets SEARCH_NOT_RECORDED,
// naming the recorded searches, and no paid search.
func TestReplayNewQuery(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := batchClient{t: t, url: f.URL}
	orig := submitAndWait(t, c, "Search the web: what is new today? sim:fresh-query")
	if orig.Status != "completed" || len(orig.Trace) != 1 || orig.Trace[0].Result == "" {
		t.Fatalf("original: %+v", orig)
	}
	paid := engineRequests(f.Sim.Stats())
	rep := replay(t, c, orig.ID)
	if got := engineRequests(f.Sim.Stats()); got != paid {
		t.Errorf("the replay made %d engine requests", got-paid)
	}
	if rep.Status != "completed" || len(rep.Trace) != 1 || rep.Usage.Searches != 0 {
		t.Fatalf("replay: %+v", rep)
	}
	e := rep.Trace[0]
	if e.Query == orig.Trace[0].Query || !strings.HasPrefix(e.Error, "SEARCH_NOT_RECORDED") || !strings.Contains(e.Error, orig.Trace[0].Query) || e.Result != "" {
		t.Errorf("replay trace: %+v", e)
	}
}
