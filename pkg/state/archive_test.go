package state_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// archiveEnv is a store over the real Redis (the test's own prefix) whose ended jobs'
// records go to a records bucket on a real embedded JetStream server, and a store over
// the same keys without an archive (the form records had before).
type archiveEnv struct {
	rdb    redis.UniversalClient
	prefix string
	s      *state.Store // with the archive
	old    *state.Store // without: records stay in Redis
}

func newArchiveEnv(t *testing.T) *archiveEnv {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	b, _ := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	records, err := bus.OpenRecords(ctx, b, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &archiveEnv{rdb: rdb, prefix: prefix,
		s:   state.New(rdb, prefix, time.Hour, state.WithArchive(records)),
		old: state.New(rdb, prefix, time.Hour)}
}

// memory sums MEMORY USAGE over the keys matching pattern under the test's prefix.
func (e *archiveEnv) memory(t *testing.T, pattern string) (bytes int64, keys int) {
	t.Helper()
	ctx := context.Background()
	names, err := testenv.Keys(ctx, e.rdb, e.prefix+pattern)
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]*redis.IntCmd, len(names))
	e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range names {
			cmds[i] = p.MemoryUsage(ctx, k, 0)
		}
		return nil
	})
	for _, c := range cmds {
		bytes += c.Val()
	}
	return bytes, len(names)
}

// jobMemory is what Redis holds for one job (its {job}-tagged keys).
func (e *archiveEnv) jobMemory(t *testing.T, id string) (int64, int) {
	return e.memory(t, ":{"+id+"}*")
}

// flush deletes every key of the test's prefix: Redis restarted with an empty dataset.
func (e *archiveEnv) flush(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	keys, err := testenv.Keys(ctx, e.rdb, e.prefix+":*")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		e.rdb.Del(ctx, k)
	}
	if n, keys := e.memory(t, ":*"); keys != 0 {
		t.Fatalf("%d keys (%d bytes) left after the flush", keys, n)
	}
}

// request is a chat request of about size bytes.
func request(size int) json.RawMessage {
	pad := strings.Repeat("lorem ipsum dolor sit amet ", size/27+1)[:size]
	b, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "user", "content": pad},
		map[string]any{"role": "user", "content": "what is new in Go? <b>&</b>"}}})
	return b
}

// runJob records a chat job of tenant t0 with a request of size bytes as a running job
// does — a model turn, a dispatched search with its result, a recorded search, a
// stored response — and ends it with an answer and a trace, through store s.
func runJob(t testing.TB, s *state.Store, id string, size int) *state.Job {
	t.Helper()
	ctx := context.Background()
	j := &state.Job{ID: id, Tenant: "t0", Kind: "chat", Model: "m", Request: request(size), Question: "what is new in Go?",
		Deadline: time.Now().Add(time.Minute), Callback: json.RawMessage(`{"url":"https://example.com/hook"}`), HasStoredResponse: true}
	if err := s.Jobs.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := s.Jobs.SaveResponse(ctx, id, &state.StoredResponse{Tenant: "t0", Input: json.RawMessage(`[{"role":"user","content":"what is new in Go?"}]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chains.SaveTurn(ctx, id, 0, []byte(`{"role":"assistant","tool_calls":[{"id":"c1","name":"web_search"}]}`), true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chains.SaveCalls(ctx, id, 0, []byte(`[{"id":"c1","query":"go news"}]`), 1, 1); err != nil {
		t.Fatal(err)
	}
	result := []byte(`{"job_id":"` + id + `","hop":0,"call_id":"c1","result":{"hits":[{"title":"Go 1.26","url":"https://go.dev/"}]}}`)
	if err := s.Searches.SaveSearchDone(ctx, id, 0, "c1", result, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Chains.RecordResult(ctx, id, 0, "c1", result); err != nil {
		t.Fatal(err)
	}
	if err := s.Searches.RecordSearch(ctx, id, "addr-go-news", []byte(`{"hits":[{"title":"Go 1.26","url":"https://go.dev/"}]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chains.SaveTurn(ctx, id, 1, []byte(`{"role":"assistant","content":"Go 1.26 is out [1]."}`), false, false); err != nil {
		t.Fatal(err)
	}
	ok, err := s.Jobs.Finish(ctx, id, state.Completed,
		"response", json.RawMessage(`{"choices":[{"message":{"content":"Go 1.26 is out [1]. <b>&</b>"}}]}`),
		"usage", json.RawMessage(`{"searches":1,"cost_usd":0.01}`),
		"trace", json.RawMessage(`[{"query":"go news","engine":"sim","result":"addr-go-news"}]`))
	if err != nil || !ok {
		t.Fatalf("finish = %v, %v", ok, err)
	}
	got, err := s.Jobs.GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// sameJob fails unless got is want (the record as it stood before it was archived).
func sameJob(t *testing.T, what string, got, want *state.Job) {
	t.Helper()
	if got.ID != want.ID || got.Tenant != want.Tenant || got.Status != want.Status || got.Kind != want.Kind || got.Model != want.Model ||
		got.Question != want.Question || !got.Created.Equal(want.Created) || !got.Finished.Equal(want.Finished) {
		t.Errorf("%s: job %+v, want %+v", what, got, want)
	}
	for _, f := range []struct {
		name      string
		got, want json.RawMessage
	}{{"request", got.Request, want.Request}, {"response", got.Response, want.Response}, {"trace", got.Trace, want.Trace},
		{"usage", got.Usage, want.Usage}, {"callback", got.Callback, want.Callback}} {
		if !bytes.Equal(f.got, f.want) {
			t.Errorf("%s: %s is %d bytes %.80q, want %d bytes %.80q", what, f.name, len(f.got), f.got, len(f.want), f.want)
		}
	}
}

// A finished job keeps at most a kilobyte in Redis once archived, and reads back as
// it was: the record, the recorded searches, the stored response. Archiving again
// changes nothing, and a late result does not bring its chain back.
func TestArchivedJobKeepsAKilobyteInRedis(t *testing.T) {
	t.Parallel()
	e := newArchiveEnv(t)
	ctx := context.Background()
	want := runJob(t, e.s, "job_a", 50<<10)
	before, keys := e.jobMemory(t, "job_a")
	footBefore, err := e.s.Ledger.JobFootprint(ctx, "job_a")
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.s.Jobs.ArchiveJob(ctx, "job_a")
	if err != nil || n < 50<<10 {
		t.Fatalf("ArchiveJob = %d, %v", n, err)
	}
	after, keysAfter := e.jobMemory(t, "job_a")
	t.Logf("Redis bytes of a finished job with a 50 KB request (MEMORY USAGE of its keys): %d in %d keys before, %d in %d keys after; %d bytes archived", before, keys, after, keysAfter, n)
	if after > 1024 {
		t.Errorf("the finished job holds %d bytes in Redis (%d keys), want at most 1024", after, keysAfter)
	}
	got, err := e.s.Jobs.GetJob(ctx, "job_a")
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "archived", got, want)
	recs, err := e.s.Searches.RecordedSearches(ctx, "job_a")
	if err != nil || len(recs) != 1 || !strings.Contains(string(recs["addr-go-news"]), "go.dev") {
		t.Errorf("recorded searches %q, %v", recs, err)
	}
	resp, err := e.s.Jobs.GetResponse(ctx, "job_a")
	if err != nil || resp.Tenant != "t0" || !strings.Contains(string(resp.Input), "what is new in Go?") {
		t.Errorf("stored response %+v, %v", resp, err)
	}
	// The quota counts the bytes wherever they are.
	foot, err := e.s.Ledger.JobFootprint(ctx, "job_a")
	if err != nil || foot < n || foot > footBefore*2 {
		t.Errorf("footprint %d after archiving (%d archived, %d before), %v", foot, n, footBefore, err)
	}
	// Again: nothing changes.
	if again, err := e.s.Jobs.ArchiveJob(ctx, "job_a"); err != nil || again != n {
		t.Errorf("ArchiveJob again = %d, %v; want %d", again, err, n)
	}
	// A redelivered result of the ended job records nothing, and makes no chain.
	if have, want, err := e.s.Chains.RecordResult(ctx, "job_a", 0, "c1", []byte(`{}`)); err != nil || have != 0 || want != -1 {
		t.Errorf("late result = %d/%d, %v", have, want, err)
	}
	// So does a redelivered resume, which reads the ended job back and claims no hop.
	if st, err := e.s.Chains.RecordAndLoad(ctx, "job_a", 0, "c1", []byte(`{}`), "w", time.Second); err != nil || st.Have != 0 || st.Want != -1 ||
		st.Claimed || st.Job.Status != state.Completed || len(st.Chain.Hops) != 0 {
		t.Errorf("late resume = %+v, %v", st, err)
	}
	if st, err := e.s.Chains.SaveCalls(ctx, "job_a", 2, []byte(`[]`), 1, 1); err != nil || st != state.Completed {
		t.Errorf("late dispatch = %q, %v", st, err)
	}
	if again, keys := e.jobMemory(t, "job_a"); again > after {
		t.Errorf("late writes grew the job to %d bytes in %d keys", again, keys)
	}
	// Listings read an archived job's question, usage and error from Redis alone.
	if js, _, err := e.s.Jobs.TenantJobs(ctx, "t0", "", 10); err != nil || len(js) != 1 || js[0].Question != want.Question ||
		!bytes.Equal(js[0].Usage, want.Usage) || js[0].Status != state.Completed || js[0].Request != nil {
		t.Errorf("listing: %+v, %v", js, err)
	}
	// The webhook status, a hot field, still moves.
	if now, changed, err := e.s.Webhooks.SetWebhookStatus(ctx, "job_a", "delivered"); err != nil || !changed || now != "delivered" {
		t.Errorf("webhook status: %q %v %v", now, changed, err)
	}
	if got, _ := e.s.Jobs.GetJob(ctx, "job_a"); got.WebhookStatus != "delivered" || len(got.Response) == 0 {
		t.Errorf("after the webhook: %q, %d bytes of answer", got.WebhookStatus, len(got.Response))
	}
}

// A job whose record was archived is served from the archive when Redis has nothing
// of it (a restart with an empty dataset): the record, its recorded searches (what a
// replay reads) and its stored response.
func TestArchivedJobSurvivesAnEmptyRedis(t *testing.T) {
	t.Parallel()
	e := newArchiveEnv(t)
	ctx := context.Background()
	want := runJob(t, e.s, "job_b", 4<<10)
	if _, err := e.s.Jobs.ArchiveJob(ctx, "job_b"); err != nil {
		t.Fatal(err)
	}
	e.flush(t)
	got, err := e.s.Jobs.GetJob(ctx, "job_b")
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "after the flush", got, want)
	if recs, err := e.s.Searches.RecordedSearches(ctx, "job_b"); err != nil || len(recs) != 1 {
		t.Errorf("recorded searches %q, %v", recs, err)
	}
	if resp, err := e.s.Jobs.GetResponse(ctx, "job_b"); err != nil || resp.Tenant != "t0" {
		t.Errorf("stored response %+v, %v", resp, err)
	}
	if _, err := e.s.Jobs.GetJob(ctx, "job_never"); err != state.ErrNotFound {
		t.Errorf("an unknown job = %v, want ErrNotFound", err)
	}
	if _, err := e.s.Jobs.GetResponse(ctx, "job_never"); err != state.ErrNotFound {
		t.Errorf("an unknown response = %v, want ErrNotFound", err)
	}
	// Without the archive, the job is gone: the test can fail.
	if _, err := e.old.Jobs.GetJob(ctx, "job_b"); err != state.ErrNotFound {
		t.Errorf("a store without the archive found the job: %v", err)
	}
}

// A record written the old way (wholly in Redis, before the archive) is served as it
// was by a store with the archive, and is archived like a new one when asked.
func TestOldFormRecordStillServed(t *testing.T) {
	t.Parallel()
	e := newArchiveEnv(t)
	ctx := context.Background()
	want := runJob(t, e.old, "job_old", 8<<10)
	want.Question = "" // jobs of before kept no question
	if err := e.rdb.HDel(ctx, e.s.K.Job("job_old"), "question").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.Jobs.GetJob(ctx, "job_old")
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "old form", got, want)
	if recs, err := e.s.Searches.RecordedSearches(ctx, "job_old"); err != nil || len(recs) != 1 {
		t.Errorf("recorded searches %q, %v", recs, err)
	}
	if resp, err := e.s.Jobs.GetResponse(ctx, "job_old"); err != nil || resp.Tenant != "t0" {
		t.Errorf("stored response %+v, %v", resp, err)
	}
	if _, err := e.s.Jobs.ArchiveJob(ctx, "job_old"); err != nil {
		t.Fatal(err)
	}
	got, err = e.s.Jobs.GetJob(ctx, "job_old")
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "old form, archived", got, want)
}

// A record larger than a NATS message (the server's max payload, 1 MiB here) is
// stored in chunks and read back whole; a running job is not archived.
func TestArchiveLargeRecordAndRunningJob(t *testing.T) {
	t.Parallel()
	e := newArchiveEnv(t)
	ctx := context.Background()
	want := runJob(t, e.s, "job_big", 3<<19)
	n, err := e.s.Jobs.ArchiveJob(ctx, "job_big")
	if err != nil || n < 3<<19 {
		t.Fatalf("ArchiveJob = %d, %v", n, err)
	}
	e.flush(t)
	got, err := e.s.Jobs.GetJob(ctx, "job_big")
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "chunked", got, want)

	if err := e.s.Jobs.CreateJob(ctx, &state.Job{ID: "job_run", Tenant: "t0", Kind: "chat", Request: request(100)}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.Jobs.ArchiveJob(ctx, "job_run"); err != nil || n != 0 {
		t.Errorf("archiving a running job = %d, %v", n, err)
	}
	if got, err := e.s.Jobs.GetJob(ctx, "job_run"); err != nil || len(got.Request) == 0 {
		t.Errorf("the running job after an archive attempt: %v", err)
	}
}

// Many finished jobs of 50 KB requests (10,000; 1,000 under -race or -short) leave
// Redis about where it started: each keeps well under its kilobyte, its bytes live in
// the archive.
func TestFinishedJobsLeaveRedisSmall(t *testing.T) {
	t.Parallel()
	jobs, size := 10000, 50<<10
	if raceDetector || testing.Short() {
		jobs = 1000
	}
	e := newArchiveEnv(t)
	ctx := context.Background()
	start, _ := e.memory(t, ":*")
	used := func() int64 {
		m, _ := e.rdb.Info(ctx, "memory").Result()
		for _, l := range strings.Split(m, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
				var n int64
				fmt.Sscan(v, &n)
				return n
			}
		}
		return 0
	}
	usedBefore := used()
	req := request(size)
	answer := json.RawMessage(`{"choices":[{"message":{"content":"Go 1.26 is out [1]."}}]}`)
	began := time.Now()
	var wg sync.WaitGroup
	ids := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				if err := e.s.Jobs.CreateJob(ctx, &state.Job{ID: id, Tenant: "t0", Kind: "chat", Model: "m", Request: req, Question: "what is new in Go?"}); err != nil {
					t.Error(err)
					return
				}
				if _, err := e.s.Chains.SaveTurn(ctx, id, 0, []byte(`{"role":"assistant","content":"Go 1.26 is out."}`), false, false); err != nil {
					t.Error(err)
					return
				}
				if _, err := e.s.Jobs.Finish(ctx, id, state.Completed, "response", answer, "usage", json.RawMessage(`{"searches":1,"cost_usd":0.01}`)); err != nil {
					t.Error(err)
					return
				}
				if _, err := e.s.Jobs.ArchiveJob(ctx, id); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range jobs {
		ids <- fmt.Sprintf("job_many%d", i)
	}
	close(ids)
	wg.Wait()
	end, keys := e.memory(t, ":*")
	t.Logf("%d finished jobs of %d KB requests in %s: the test's keys hold %d bytes in %d keys (%d bytes a job; %d before); Redis used_memory moved by %d bytes (shared with other tests)",
		jobs, size>>10, time.Since(began).Round(time.Millisecond), end, keys, (end-start)/int64(jobs), start, used()-usedBefore)
	if end-start > int64(jobs)*1024 {
		t.Errorf("%d finished jobs hold %d bytes in Redis, want at most a kilobyte each", jobs, end-start)
	}
	if got, err := e.s.Jobs.GetJob(ctx, "job_many7"); err != nil || len(got.Request) < size {
		t.Errorf("a finished job reads back with %d bytes of request: %v", len(got.Request), err)
	}
}

// readers is what the store's readers return for one job.
type readers struct {
	job      *state.Job
	searches map[string][]byte
	response *state.StoredResponse
}

func (r readers) String() string {
	j := r.job
	return fmt.Sprintf("job %s %s %s model %q question %q batch %s webhook %s created %s finished %s deadline %s error %+v\n request %s\n response %s usage %s trace %s callback %s\n searches %q\n stored response %s %s %q",
		j.ID, j.Tenant, j.Status, j.Model, j.Question, j.Batch, j.WebhookStatus, j.Created, j.Finished, j.Deadline, j.Error,
		j.Request, j.Response, j.Usage, j.Trace, j.Callback, r.searches, r.response.Tenant, r.response.Input, r.response.Echo)
}

// memArchive is an Archive in memory: the test reads the archived bytes themselves.
type memArchive struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (a *memArchive) Put(_ context.Context, key string, value []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.m[key]; !ok {
		a.m[key] = bytes.Clone(value)
	}
	return nil
}

func (a *memArchive) Get(_ context.Context, key string) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[key], nil
}

// An archived job reads back as Redis held it, value for value: JSON as it was
// written (spaces and all), and text that looks like JSON (a question "[1, 2]") as
// the text it is. Every reader then sees the same job, searches and response as
// before the archive, with Redis or without.
func TestArchivedJobReadsBackIdentically(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	mem := &memArchive{m: map[string][]byte{}}
	s := state.New(rdb, prefix, time.Hour, state.WithArchive(mem))
	ctx := context.Background()
	const id = "job_same"
	text := "[1, 2] \"quoted\" <b>&</b> \\ tab\t line\u2028end \x01 é 日本"
	j := &state.Job{ID: id, Tenant: "t0", Kind: "chat", Model: `{"m": 1}`, Question: text, Batch: "b1",
		Request:  json.RawMessage(`{"model": "m",  "messages": [ {"role": "user", "content": "<b>&</b> \u2028 é"} ]}`),
		Callback: json.RawMessage(`{"url": "https://example.com/hook?a=1&b=2"}`), Deadline: time.Now().Add(time.Minute), HasStoredResponse: true}
	if err := s.Jobs.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := s.Jobs.SaveResponse(ctx, id, &state.StoredResponse{Tenant: "t0", Input: json.RawMessage(`[{"role": "user", "content": "<b>"}]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chains.SaveTurn(ctx, id, 0, []byte(`{"role": "assistant", "tool_calls": [ {"id": "c1"} ]}`), true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chains.SaveCalls(ctx, id, 0, []byte(`[ {"id": "c1", "query": "go & news"} ]`), 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Chains.RecordResult(ctx, id, 0, "c1", []byte(`{"call_id": "c1", "result": {"hits": []}}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Searches.RecordSearch(ctx, id, "addr", []byte(`{"query": "go & news", "hits": [ ]}`)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Jobs.Finish(ctx, id, state.Failed, "error", &state.JobError{Status: 502, Type: "upstream_error", Message: text},
		"response", json.RawMessage(`{"choices": [ ]}`), "usage", json.RawMessage(`{"searches": 1, "cost_usd": 0.01}`),
		"trace", json.RawMessage(`[ {"query": "go & news"} ]`)); err != nil || !ok {
		t.Fatalf("finish = %v, %v", ok, err)
	}

	hashes := func() (job, chain, searches map[string]string, response []byte) {
		all, _ := rdb.HGetAll(ctx, s.K.Job(id)).Result()
		job, chain, searches, _ = state.SplitJob(all) // the chain and the records live in the job's hash
		response, _ = rdb.Get(ctx, s.K.StoredResponse(id)).Bytes()
		return
	}
	read := func(what string) readers {
		var r readers
		var err error
		if r.job, err = s.Jobs.GetJob(ctx, id); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.searches, err = s.Searches.RecordedSearches(ctx, id); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.response, err = s.Jobs.GetResponse(ctx, id); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return r
	}
	wantJob, wantChain, wantSearches, wantResponse := hashes()
	want := read("before")

	if _, err := s.Jobs.ArchiveJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	job, chain, searches, response, err := state.DecodeArchived(mem.m[id])
	if err != nil {
		t.Fatalf("the archived record does not read: %v\n%s", err, mem.m[id])
	}
	for _, h := range []struct {
		name      string
		got, want map[string]string
	}{{"job", job, wantJob}, {"chain", chain, wantChain}, {"searches", searches, wantSearches}} {
		if len(h.got) != len(h.want) {
			t.Errorf("archived %s has %d fields, Redis had %d", h.name, len(h.got), len(h.want))
		}
		for k, v := range h.want {
			if h.got[k] != v {
				t.Errorf("archived %s field %s = %q, Redis had %q", h.name, k, h.got[k], v)
			}
		}
	}
	if !bytes.Equal(response, wantResponse) {
		t.Errorf("archived response %q, Redis had %q", response, wantResponse)
	}
	for _, what := range []string{"archived", "archived, Redis empty"} {
		if what == "archived, Redis empty" {
			rdb.Del(ctx, s.K.Job(id))
		}
		if got := read(what); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: readers see\n%s\nwant\n%s", what, got, want)
		}
	}
}

// With an archive, an ended job is counted in its tenant's spend per model when its
// record is trimmed, from the spend ledger the trim drops (its usage's cost_usd when
// the ledger held nothing), once however often the finish hooks run; the model-spend
// hook itself then writes nothing. On a single Redis the trim's own script counts it;
// across a cluster's slots it is counted right after the trim.
func TestArchiveCountsModelSpendOnce(t *testing.T) {
	t.Parallel()
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster=%v", cluster), func(t *testing.T) {
			e := newArchiveEnv(t)
			if cluster {
				state.AsCluster(e.s)
			}
			ctx := context.Background()
			now := time.Now()
			j := runJob(t, e.s, "job_s", 1<<10)
			if _, err := e.s.Ledger.SettleTurn(ctx, "job_s", "t0", "job_s:0@model", 0.25, 0, now); err != nil {
				t.Fatal(err)
			}
			// No ledger: its usage's cost_usd (0.01) is counted.
			free := runJob(t, e.s, "job_free", 1<<10)
			for range 3 { // a redelivered terminal event runs the hooks again
				for _, j := range []*state.Job{j, free} {
					if err := e.s.Ledger.RecordModelSpend(ctx, j); err != nil {
						t.Fatal(err)
					}
					if _, err := e.s.Jobs.ArchiveJob(ctx, j.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, err := e.s.Ledger.ModelSpend(ctx, "t0", 1, now)
			if err != nil {
				t.Fatal(err)
			}
			want := []state.ModelDaySpend{{Day: now.UTC().Format(time.DateOnly), Model: "m", USD: 0.26, Jobs: 2, Searches: 2}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("spend per model %v, want %v", got, want)
			}
			if v, _ := e.rdb.HGet(ctx, e.s.K.Job("job_s"), "spend_counted").Result(); v != "" {
				t.Errorf("the model-spend hook marked the record (%q): the trim counts it", v)
			}
			day := e.s.K.ModelSpendDay("t0", now.UTC().Format("20060102"))
			if ttl := e.rdb.TTL(ctx, day).Val(); ttl < 24*time.Hour {
				t.Errorf("the day's spend per model has TTL %v, want its lifetime", ttl)
			}
		})
	}
}

// The finisher's read of an ended job (ReadEnded) is what its archiving archives
// (ArchiveEnded): the record, chain, recorded searches and stored response, as
// ArchiveJob would have read them.
func TestArchiveEndedArchivesTheFinishersRead(t *testing.T) {
	t.Parallel()
	e := newArchiveEnv(t)
	ctx := context.Background()
	want := runJob(t, e.s, "job_read", 1<<10)
	j, err := e.s.Jobs.ReadEnded(ctx, "job_read")
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "read ended", j, want)
	if n, err := e.s.Jobs.ArchiveEnded(ctx, j); err != nil || n == 0 {
		t.Fatalf("archived %d bytes, %v", n, err)
	}
	e.flush(t)
	got, err := e.s.Jobs.GetJob(ctx, "job_read")
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "after the flush", got, want)
	if recs, err := e.s.Searches.RecordedSearches(ctx, "job_read"); err != nil || len(recs) != 1 {
		t.Errorf("recorded searches %q, %v", recs, err)
	}
	if resp, err := e.s.Jobs.GetResponse(ctx, "job_read"); err != nil || resp.Tenant != "t0" {
		t.Errorf("stored response %+v, %v", resp, err)
	}
	// Read again once archived: the cold part comes from the archive, and archiving
	// again changes nothing.
	j, err = e.s.Jobs.ReadEnded(ctx, "job_read")
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "read archived", j, want)
	if _, err := e.s.Jobs.ArchiveEnded(ctx, j); err != nil {
		t.Fatal(err)
	}
}

// A job says whether it has a stored response: one without is archived without
// looking one up.
func TestArchiveLooksUpAStoredResponseOnlyWhenThereIsOne(t *testing.T) {
	t.Parallel()
	e := newArchiveEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		id   string
		flag bool
		want bool
	}{{"job_flag", true, true}, {"job_none", false, false}} {
		if err := e.s.Jobs.CreateJob(ctx, &state.Job{ID: c.id, Tenant: "t0", Kind: "chat", HasStoredResponse: c.flag}); err != nil {
			t.Fatal(err)
		}
		// A response saved against a job that says it has none (never so in the
		// fleet) shows that none is looked up.
		if err := e.s.Jobs.SaveResponse(ctx, c.id, &state.StoredResponse{Tenant: "t0", Input: json.RawMessage(`[]`)}); err != nil {
			t.Fatal(err)
		}
		if ok, err := e.s.Jobs.Finish(ctx, c.id, state.Completed, "response", json.RawMessage(`{}`)); err != nil || !ok {
			t.Fatalf("finish = %v, %v", ok, err)
		}
		j, err := e.s.Jobs.ReadEnded(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if j.HasStoredResponse != c.flag {
			t.Errorf("%s: HasStoredResponse %v, want %v", c.id, j.HasStoredResponse, c.flag)
		}
		if _, err := e.s.Jobs.ArchiveEnded(ctx, j); err != nil {
			t.Fatal(err)
		}
		_, err = e.s.Jobs.GetResponse(ctx, c.id)
		if got := err == nil; got != c.want {
			t.Errorf("%s: stored response archived %v (%v), want %v", c.id, got, err, c.want)
		}
	}
}

// An archived job keeps its summary in its trimmed record, which stays a compact hash
// (listpack) however long its question and error: the summary is kept in pieces no
// longer than the compact encoding allows. A job with a question of 200 characters
// keeps under a kilobyte; with a long error too, no more than the record and a
// summary key of its own (the earlier layout) took. The listing shows them whole.
func TestArchivedJobKeepsItsSummaryCompact(t *testing.T) {
	t.Parallel()
	e := newArchiveEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		id, question string
		err          *state.JobError
	}{
		{"job_long", strings.Repeat("what is new in Go? ", 11)[:200], nil},
		{"job_long_failed", strings.Repeat("é<b>", 50), // 200 characters, as the front door clips them
			&state.JobError{Status: 502, Type: "upstream_error", Message: strings.Repeat("the model provider failed ", 20)}},
	} {
		j := &state.Job{ID: c.id, Tenant: "t0", Kind: "chat", Model: "gpt-4o-mini", Request: request(4 << 10), Question: c.question,
			Deadline: time.Now().Add(time.Minute)}
		if err := e.s.Jobs.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		status, fields := state.Completed, []any{"usage", json.RawMessage(`{"searches":3,"cost_usd":0.02}`)}
		if c.err != nil {
			status, fields = state.Failed, append(fields, "error", c.err)
		}
		if ok, err := e.s.Jobs.Finish(ctx, j.ID, status, fields...); err != nil || !ok {
			t.Fatalf("finish = %v, %v", ok, err)
		}
		if _, err := e.s.Jobs.ArchiveJob(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		after, keys := e.jobMemory(t, j.ID)
		enc, _ := e.rdb.ObjectEncoding(ctx, e.s.K.Job(j.ID)).Result()
		t.Logf("Redis bytes of a finished job with a 200-character question (error: %v): %d in %d keys (%s)",
			c.err != nil, after, keys, enc)
		if keys != 1 || enc != "listpack" || c.err == nil && after > 1024 {
			t.Errorf("%s holds %d bytes in %d keys, its record encoded %s; want one listpack key, and a kilobyte without an error",
				c.id, after, keys, enc)
		}
	}
	js, _, err := e.s.Jobs.TenantJobs(ctx, "t0", "", 10)
	if err != nil || len(js) != 2 {
		t.Fatalf("listing: %+v, %v", js, err)
	}
	for _, got := range js {
		want := strings.Repeat("what is new in Go? ", 11)[:200]
		if got.ID == "job_long_failed" {
			want = strings.Repeat("é<b>", 50)
			if got.Error == nil || got.Error.Type != "upstream_error" || got.Error.Status != 502 ||
				got.Error.Message != strings.Repeat("the model provider failed ", 20)[:200]+"…" {
				t.Errorf("%s is listed with error %+v", got.ID, got.Error)
			}
		}
		if got.Question != want || string(got.Usage) != `{"searches":3,"cost_usd":0.02}` {
			t.Errorf("%s is listed as %+v", got.ID, got)
		}
	}
}
