package chat_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// withRecords gives the worker a store's recorded results.
func withRecords(s chat.Records) option {
	return func(w *chat.Worker, _ *harness) { w.Records = s }
}

// recordsStore is a record of its own: the Redis store over miniredis. A job's
// record lives beside the job, so the harnesses of a test that reads it run on it.
func recordsStore(t *testing.T) *state.Store { return redistest.Store(t) }

// recordFetch records a page as the fetch worker does after reading it for jobID.
func recordFetch(t *testing.T, s chat.Records, jobID string, p *fetch.Page) {
	t.Helper()
	b, err := json.Marshal(search.FetchRecord{Result: *search.PageResult(p), Page: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSearch(context.Background(), jobID, search.FetchAddress(p.URL), b); err != nil {
		t.Fatal(err)
	}
}

// toolMessages are the tool results of a model request, in order.
func toolMessages(t *testing.T, body string) []string {
	t.Helper()
	var req struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range req.Messages {
		if m["role"] == "tool" {
			s, _ := m["content"].(string)
			out = append(out, s)
		}
	}
	return out
}

func jobTrace(t *testing.T, j *state.Job) []wire.TraceEntry {
	t.Helper()
	var trace []wire.TraceEntry
	if err := json.Unmarshal(j.Trace, &trace); err != nil {
		t.Fatalf("trace %s: %v", j.Trace, err)
	}
	return trace
}

// A replay reads the pages the original job fetched from its record: the model is
// given the same page as the same source, no fetch is published, and the trace
// names the record. A URL the original did not fetch gets FETCH_NOT_RECORDED,
// naming the pages the record has.
func TestReplayAnswersFetchesFromTheRecord(t *testing.T) {
	t.Parallel()
	const url, other = "https://docs.example/guide", "https://elsewhere.example/"
	records := recordsStore(t)
	if err := records.Jobs.CreateJob(context.Background(), &state.Job{ID: "orig", Kind: "chat", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	recordFetch(t, records.Searches, "orig", &fetch.Page{URL: url, FinalURL: url, Status: 200, Title: "Guide", Kind: fetch.KindPage,
		Text: "Use version 2.", Bytes: 14, Retrieved: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)})
	h := newHarnessOn(t, records, []func(http.ResponseWriter){
		calls(webFetch("f1", url), webFetch("f2", other)),
		text("Use v2 [1]."),
	}, withFetches(5), withRecords(records.Searches))
	req := `{"model":"m","messages":[{"role":"user","content":"Summarise ` + url + ` and ` + other + `"}]}`
	h.submitRaw(&state.Job{ID: "replay1", Kind: "chat", Model: "m", ReplayOf: "orig", Request: storedChat(t, req)})
	if err := h.job("replay1", 1); err != nil {
		t.Fatal(err)
	}
	if got := h.pub.fetches(); len(got) != 0 {
		t.Fatalf("a replay published fetches %+v", got)
	}
	if h.model.calls() != 2 {
		t.Fatalf("%d model calls: the replayed hop did not complete locally", h.model.calls())
	}
	tools := toolMessages(t, h.model.body(1))
	if len(tools) != 2 || !strings.Contains(tools[0], "[1] Guide ("+url+")") || !strings.Contains(tools[0], "Use version 2.") {
		t.Fatalf("recorded page not rendered: %q", tools)
	}
	if !strings.Contains(tools[1], "not fetched by the job being replayed") || !strings.Contains(tools[1], `only the original fetches are available: "`+url+`"`) {
		t.Fatalf("unrecorded fetch: %q", tools[1])
	}
	j := h.ended("replay1")
	if j.Status != state.Completed {
		t.Fatalf("job %s %s", j.Status, j.Error)
	}
	trace := jobTrace(t, j)
	if len(trace) != 2 {
		t.Fatalf("trace %s", j.Trace)
	}
	if e := trace[0]; e.URL != url || len(e.Sources) != 1 || e.Sources[0].URL != url || e.Error != "" ||
		e.RetrievedAt != "2026-11-01T09:00:00Z" || !strings.Contains(e.Excerpt, "Use version 2.") {
		t.Errorf("replayed fetch's trace entry %+v", e)
	}
	if strings.Count(string(j.Trace), `"worker":"replay"`) != 2 {
		t.Errorf("trace does not say replay: %s", j.Trace)
	}
	if !strings.Contains(string(j.Trace), `"result":"`+search.FetchAddress(url)+`"`) {
		t.Errorf("trace lacks the page's content address: %s", j.Trace)
	}
	if e := trace[1]; !strings.HasPrefix(e.Error, "FETCH_NOT_RECORDED: ") || len(e.Sources) != 0 {
		t.Errorf("unrecorded fetch's trace entry %+v", e)
	}
	// The replay's record holds the page too: a replay of the replay reads it.
	if rec, err := records.Searches.RecordedSearches(context.Background(), "replay1"); err != nil || rec[search.FetchAddress(url)] == nil {
		t.Errorf("replay's record %v %v", rec, err)
	}
}

// Within one job, a second fetch of a page already read is answered from the job's
// record: the page is fetched once, and the repeat is marked as a dedupe.
func TestRepeatedFetchInAJobIsReadFromTheRecord(t *testing.T) {
	t.Parallel()
	const url = "https://docs.example/guide"
	records := recordsStore(t)
	h := newHarnessOn(t, records, []func(http.ResponseWriter){
		calls(webFetch("f1", url)),
		calls(webFetch("f2", url+"#install")),
		text("Use v2 [1]."),
	}, withFetches(5), withRecords(records.Searches))
	h.submit("j1", "Summarise "+url)
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	reqs := h.pub.fetches()
	if len(reqs) != 1 {
		t.Fatalf("fetches %+v", reqs)
	}
	page := &fetch.Page{URL: url, FinalURL: url, Status: 200, Title: "Guide", Kind: fetch.KindPage, Text: "Use version 2."}
	recordFetch(t, records.Searches, "j1", page) // what the fetch worker does before publishing
	if err := h.resume(answerFetch(reqs[0], page), 1); err != nil {
		t.Fatal(err)
	}
	if got := h.pub.fetches(); len(got) != 1 {
		t.Fatalf("the repeated fetch was published: %+v", got)
	}
	if h.model.calls() != 3 {
		t.Fatalf("%d model calls: the repeated fetch did not complete its hop", h.model.calls())
	}
	tools := toolMessages(t, h.model.body(2))
	if len(tools) != 2 || !strings.Contains(tools[1], "Use version 2.") || !strings.Contains(tools[1], "("+url+")") {
		t.Fatalf("repeated fetch not answered with the page: %q", tools)
	}
	j := h.ended("j1")
	trace := jobTrace(t, j)
	if len(trace) != 2 || trace[1].Error != "" || len(trace[1].Sources) != 1 || trace[1].Sources[0].URL != url {
		t.Fatalf("trace %s", j.Trace)
	}
	if !strings.Contains(string(j.Trace), `"worker":"dedupe"`) {
		t.Errorf("trace does not say dedupe: %s", j.Trace)
	}
}

// A replay answers its searches from the original job's record: a search the original
// made gets the recorded result (its sources, at no cost), one it did not make gets
// SEARCH_NOT_RECORDED naming the original's queries; nothing is published and no
// engine is paid.
func TestReplayAnswersSearchesFromTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	records := recordsStore(t)
	// The original job's search, recorded under the address the search worker uses.
	orig := newHarnessOn(t, records, []func(http.ResponseWriter){calls(webSearch("c1", "weather in Paris"))})
	orig.submit("orig", "Search the web: weather in Paris?")
	if err := orig.job("orig", 1); err != nil {
		t.Fatal(err)
	}
	reqs := orig.pub.searches()
	if len(reqs) != 1 {
		t.Fatalf("original searches %+v", reqs)
	}
	done := answerSearch(reqs[0], "https://paris.example/")
	done.Result.Usage.CostUSD = 0.005
	b, _ := json.Marshal(done.Result)
	if err := records.Searches.RecordSearch(ctx, "orig", search.Address(reqs[0].Engine, reqs[0].Query), b); err != nil {
		t.Fatal(err)
	}

	h := newHarnessOn(t, records, []func(http.ResponseWriter){
		calls(webSearch("c1", "weather in Paris"), webSearch("c2", "weather in Rome")),
		text("Sunny [1]."),
	}, withRecords(records.Searches))
	h.submitRaw(&state.Job{ID: "replay1", Kind: "chat", Model: "m", ReplayOf: "orig",
		Request: storedChat(t, `{"model":"m","messages":[{"role":"user","content":"Search the web: weather in Paris and Rome?"}]}`)})
	if err := h.job("replay1", 1); err != nil {
		t.Fatal(err)
	}
	if got := h.pub.searches(); len(got) != 0 {
		t.Fatalf("a replay published searches %+v", got)
	}
	if h.model.calls() != 2 {
		t.Fatalf("%d model calls: the replayed hop did not complete locally", h.model.calls())
	}
	tools := toolMessages(t, h.model.body(1))
	if len(tools) != 2 || !strings.Contains(tools[0], "https://paris.example/") {
		t.Fatalf("recorded search not rendered: %q", tools)
	}
	if !strings.Contains(tools[1], "not made by the job being replayed") || !strings.Contains(tools[1], `only the original searches are available: "weather in Paris"`) {
		t.Fatalf("unrecorded search: %q", tools[1])
	}
	j := h.ended("replay1")
	if j.Status != state.Completed {
		t.Fatalf("job %s %+v", j.Status, j.Error)
	}
	trace := jobTrace(t, j)
	if len(trace) != 2 || len(trace[0].Sources) != 1 || trace[0].Sources[0].URL != "https://paris.example/" || !strings.HasPrefix(trace[1].Error, "SEARCH_NOT_RECORDED") {
		t.Fatalf("trace %s", j.Trace)
	}
	if !strings.Contains(string(j.Trace), `"worker":"replay"`) {
		t.Errorf("trace does not say replay: %s", j.Trace)
	}
	var u struct {
		SearchCost float64 `json:"search_cost_usd"`
	}
	if err := json.Unmarshal(j.Usage, &u); err != nil || u.SearchCost != 0 {
		t.Errorf("usage %s: a recorded search is not paid again", j.Usage)
	}
}

// lookups counts the record lookups a worker makes.
type lookups struct {
	chat.Records
	mu sync.Mutex
	n  int
}

func (l *lookups) RecordedSearch(ctx context.Context, jobID, batchID string, addrs []string) (map[string][]byte, map[string]bool, error) {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	return l.Records.RecordedSearch(ctx, jobID, batchID, addrs)
}

func (l *lookups) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// A job that is neither a replay nor a batch's line has recorded nothing before its
// first dispatch: its first hop's searches are not looked up in its record. Its later
// hops', and a batch line's first (the batch may have made the search), are.
func TestFirstDispatchLooksUpOnlyWhatMayBeRecorded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		batch string
		want  int
	}{{"a job of its own", "", 0}, {"a batch's line", "batch_1", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &lookups{Records: recordsStore(t).Searches}
			h := newHarness(t, []func(http.ResponseWriter){
				calls(webSearch("c1", "weather in Paris")),
				calls(webSearch("c2", "weather in Rome")),
				text("Sunny [1][2]."),
			}, withRecords(rec))
			req := `{"model":"m","messages":[{"role":"user","content":"Search the web: weather in Paris and Rome?"}]}`
			h.submitRaw(&state.Job{ID: "j1", Kind: "chat", Model: "m", Batch: tc.batch, Request: storedChat(t, req)})
			if err := h.job("j1", 1); err != nil {
				t.Fatal(err)
			}
			if got := rec.count(); got != tc.want {
				t.Errorf("%d record lookups at the first dispatch, want %d", got, tc.want)
			}
			reqs := h.pub.searches()
			if len(reqs) != 1 {
				t.Fatalf("searches %+v", reqs)
			}
			if err := h.resume(answerSearch(reqs[0], "https://paris.example/"), 1); err != nil {
				t.Fatal(err)
			}
			if got := rec.count(); got != tc.want+1 {
				t.Errorf("%d record lookups after the second dispatch, want %d", got, tc.want+1)
			}
			if got := h.pub.searches(); len(got) != 2 {
				t.Fatalf("second hop's search not published: %+v", got)
			}
		})
	}
}
