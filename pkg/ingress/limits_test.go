package ingress_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A browser's cross-site POST to a body-less cancel endpoint is refused in the
// protocol's error shape, whether the browser says so with Sec-Fetch-Site or only
// with a foreign Origin; a same-origin request and an API client's (neither header)
// reach the route.
func TestCrossOriginCancelRefused(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	for _, path := range []string{"/v1/jobs/job_abcdef/cancel", "/v1/batches/batch_abcdef/cancel", "/v1/messages"} {
		for _, hdr := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Origin": "https://evil.example"},
		} {
			req := httptest.NewRequest("POST", path, nil).WithContext(t.Context())
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			want := `"code":"cross_origin_request"`
			if path == "/v1/messages" {
				want = `"type":"permission_error"`
			}
			if rec.Code != 403 || !strings.Contains(rec.Body.String(), want) {
				t.Errorf("POST %s with %v: %d %s", path, hdr, rec.Code, rec.Body)
			}
		}
	}
	for _, hdr := range []map[string]string{{}, {"Sec-Fetch-Site": "same-origin"}, {"Origin": "http://example.com"}} {
		req := httptest.NewRequest("POST", "/v1/jobs/job_abcdef/cancel", nil).WithContext(t.Context())
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 404 { // reaches the route: no such job
			t.Errorf("POST cancel with %v: %d %s", hdr, rec.Code, rec.Body)
		}
	}
}

// limited is an ingress with tenants "a" (key ka) and "b" (key kb) over real NATS
// and Redis, with a finisher running its finish hooks (so an ended job frees its
// slot), and no workers: jobs wait until the test ends them.
type limited struct {
	h     http.Handler
	s     *ingress.Server
	store *state.Store
	m     *metrics.Metrics
}

func newLimited(t *testing.T, def config.Limits, a config.Limits) *limited {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, time.Hour)
	log := slog.New(slog.DiscardHandler)
	tenants := []config.Tenant{{ID: "a", APIKeys: []string{"ka"}, Limits: a}, {ID: "b", APIKeys: []string{"kb"}}}
	keys, err := ingress.NewTenants(tenants)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	ender := jobs.NewEnder(store.Jobs, b, nil, log)
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: 1 << 20, JobTimeout: time.Minute, SyncWait: time.Minute,
		Log: log, Tenants: keys, Limits: config.NewTenantLimits(def, tenants), Metrics: m, Ender: ender})
	fin := jobs.NewFinisher(store.Jobs, ender, nil, log, s)
	w, err := bus.Consume(t.Context(), b, bus.FinisherConsumer(bus.TimingFor(bus.ConsumerFinisher)), fin.Handle, bus.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })
	return &limited{h: s.Handler(), s: s, store: store, m: m}
}

func (l *limited) do(ctx context.Context, key, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body)).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	l.h.ServeHTTP(rec, req)
	return rec
}

func (l *limited) rejected(tenant, limit string) float64 {
	return testutilValue(l.m, "fleet_tenant_rejected_total", map[string]string{"tenant": tenant, "limit": limit})
}

// testutilValue reads one counter of m's registry.
func testutilValue(m *metrics.Metrics, name string, labels map[string]string) float64 {
	fams, _ := m.Registry.Gather()
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, c := range f.GetMetric() {
			for _, lp := range c.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			return c.GetCounter().GetValue()
		}
	}
	return 0
}

const chatBody = `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`

// A burst from tenant A past its rate is answered 429 with Retry-After, in each
// protocol's error shape; tenant B's requests in the same moment all pass.
func TestTenantRateLimit(t *testing.T) {
	t.Parallel()
	// A: 3 at once, then one per 1000 s; B: the defaults (no rate limit here).
	l := newLimited(t, config.Limits{}, config.Limits{RequestsPerSecond: 0.001, Burst: 3})
	var passed, limited int
	for range 10 {
		rec := l.do(t.Context(), "ka", "GET", "/v1/models", "")
		switch rec.Code {
		case 200:
			passed++
		case 429:
			limited++
			ra, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if err != nil || ra < 1 || !strings.Contains(rec.Body.String(), `"code":"rate_limit_exceeded"`) {
				t.Errorf("429 without Retry-After or in another shape: %q %s", rec.Header().Get("Retry-After"), rec.Body)
			}
		default:
			t.Errorf("A: %d %s", rec.Code, rec.Body)
		}
		if rec := l.do(t.Context(), "kb", "GET", "/v1/models", ""); rec.Code != 200 {
			t.Errorf("B was limited by A's burst: %d %s", rec.Code, rec.Body)
		}
	}
	if passed != 3 || limited != 7 {
		t.Errorf("A: %d passed, %d limited; want 3 and 7", passed, limited)
	}
	rec := l.do(t.Context(), "ka", "POST", "/v1/messages", chatBody)
	if rec.Code != 429 || !strings.Contains(rec.Body.String(), `"type":"rate_limit_error"`) || !strings.Contains(rec.Body.String(), `"type":"error"`) || rec.Header().Get("Retry-After") == "" {
		t.Errorf("Anthropic route: %d %s", rec.Code, rec.Body)
	}
	if n := l.rejected("a", "rate"); n != 8 {
		t.Errorf("fleet_tenant_rejected_total{a,rate} = %v, want 8", n)
	}
	if n := l.rejected("b", "rate"); n != 0 {
		t.Errorf("fleet_tenant_rejected_total{b,rate} = %v, want 0", n)
	}
}

// waitFor polls cond until it holds (or fails the test after 10 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *limited) held(t *testing.T, kind, tenant string) int {
	n, err := l.store.Leases.LeasesHeld(t.Context(), kind, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A synchronous wait and a stream each hold one of the tenant's slots while they
// wait: another is refused 429 meanwhile (tenant B is not), and the slot is free
// again both when the job ends and when the client hangs up.
func TestTenantWaitSlotsRelease(t *testing.T) {
	t.Parallel()
	l := newLimited(t, config.Limits{}, config.Limits{SyncWaits: 1, Streams: 1, QueuedJobs: 10})
	cases := []struct {
		name, kind, body string
	}{
		{"sync", state.LeaseSyncWaits, chatBody},
		{"stream", state.LeaseStreams, `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, c := range cases {
		for _, ending := range []string{"job ends", "client leaves"} {
			before, _ := l.store.Leases.LeaseIDs(t.Context(), state.LeaseJobs, "a")
			ctx, leave := context.WithCancel(t.Context())
			done := make(chan *httptest.ResponseRecorder, 1)
			go func() { done <- l.do(ctx, "ka", "POST", "/v1/chat/completions", c.body) }()
			waitFor(t, c.name+" slot taken", func() bool { return l.held(t, c.kind, "a") == 1 })
			if rec := l.do(t.Context(), "ka", "POST", "/v1/chat/completions", c.body); rec.Code != 429 || rec.Header().Get("Retry-After") == "" {
				t.Errorf("%s: a second wait of A: %d %s", c.name, rec.Code, rec.Body)
			}
			if ending == "job ends" {
				id := l.newJob(t, "a", before)
				// The slot is taken before the job is recorded (another key, on a
				// cluster another node): end the job once it exists.
				waitFor(t, "job recorded", func() bool { _, err := l.store.Jobs.JobStatus(t.Context(), id); return err == nil })
				if err := l.s.Ender.End(t.Context(), id, jobs.Ending{Status: state.Cancelled}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "job slot freed by the finisher", func() bool { return l.held(t, state.LeaseJobs, "a") == len(before) })
			} else {
				leave()
			}
			<-done
			leave()
			if n := l.held(t, c.kind, "a"); n != 0 {
				t.Errorf("%s, %s: %d slots still held", c.name, ending, n)
			}
		}
	}
	if l.rejected("a", "sync_waits") != 2 || l.rejected("a", "streams") != 2 {
		t.Errorf("rejections not counted: sync %v, streams %v", l.rejected("a", "sync_waits"), l.rejected("a", "streams"))
	}
}

// newJob is the id of the one job tenant holds a slot for that is not in before.
func (l *limited) newJob(t *testing.T, tenant string, before []string) string {
	t.Helper()
	ids, err := l.store.Leases.LeaseIDs(t.Context(), state.LeaseJobs, tenant)
	var fresh []string
	for _, id := range ids {
		if !slices.Contains(before, id) {
			fresh = append(fresh, id)
		}
	}
	if err != nil || len(fresh) != 1 {
		t.Fatalf("new job slots of %s: %v %v", tenant, fresh, err)
	}
	return fresh[0]
}

// A tenant's unfinished jobs are capped: past the cap POST /v1/jobs is 429 (another
// tenant is not), and a job that ends frees its slot for the next.
func TestTenantQueuedJobsCap(t *testing.T) {
	t.Parallel()
	l := newLimited(t, config.Limits{}, config.Limits{QueuedJobs: 2})
	var ids []string
	for i := range 2 {
		rec := l.do(t.Context(), "ka", "POST", "/v1/jobs", chatBody)
		if rec.Code != 202 {
			t.Fatalf("job %d: %d %s", i, rec.Code, rec.Body)
		}
		var v struct {
			ID string `json:"id"`
		}
		json.Unmarshal(rec.Body.Bytes(), &v)
		ids = append(ids, v.ID)
	}
	rec := l.do(t.Context(), "ka", "POST", "/v1/jobs", chatBody)
	if rec.Code != 429 || !strings.Contains(rec.Body.String(), "unfinished jobs") || rec.Header().Get("Retry-After") == "" {
		t.Errorf("third job: %d %s", rec.Code, rec.Body)
	}
	if rec := l.do(t.Context(), "kb", "POST", "/v1/jobs", chatBody); rec.Code != 202 {
		t.Errorf("B's job: %d %s", rec.Code, rec.Body)
	}
	if rec := l.do(t.Context(), "ka", "POST", "/v1/jobs/"+ids[0]+"/cancel", ""); rec.Code != 200 {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body)
	}
	waitFor(t, "the cancelled job's slot", func() bool { return l.held(t, state.LeaseJobs, "a") == 1 })
	if rec := l.do(t.Context(), "ka", "POST", "/v1/jobs", chatBody); rec.Code != 202 {
		t.Errorf("a job after one ended: %d %s", rec.Code, rec.Body)
	}
}

// With no tenants configured the open API is one tenant, "default", with the default
// limits: a burst past them is refused like any tenant's.
func TestOpenAPIIsOneTenant(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, time.Hour)
	m := metrics.New()
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: 1 << 20, Log: slog.New(slog.DiscardHandler), Metrics: m,
		Limits: config.NewTenantLimits(config.Limits{RequestsPerSecond: 0.001, Burst: 2}, nil)})
	h := s.Handler()
	codes := map[int]int{}
	for range 4 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil).WithContext(t.Context()))
		codes[rec.Code]++
	}
	if codes[200] != 2 || codes[429] != 2 {
		t.Errorf("statuses %v, want two 200 and two 429", codes)
	}
	if n := testutilValue(m, "fleet_tenant_rejected_total", map[string]string{"tenant": "default", "limit": "rate"}); n != 2 {
		t.Errorf("rejections of tenant default: %v", n)
	}
}

// GET /v1/jobs/{id}/events holds a stream slot while it is open: another stream is
// refused meanwhile, and the slot is free once the client hangs up.
func TestEventsStreamHoldsASlot(t *testing.T) {
	t.Parallel()
	l := newLimited(t, config.Limits{}, config.Limits{Streams: 1})
	rec := l.do(t.Context(), "ka", "POST", "/v1/jobs", chatBody)
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(rec.Body.Bytes(), &v); rec.Code != 202 {
		t.Fatalf("job: %d %s", rec.Code, rec.Body)
	}
	ctx, leave := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); l.do(ctx, "ka", "GET", "/v1/jobs/"+v.ID+"/events", "") }()
	waitFor(t, "the stream's slot", func() bool { return l.held(t, state.LeaseStreams, "a") == 1 })
	if rec := l.do(t.Context(), "ka", "GET", "/v1/jobs/"+v.ID+"/events", ""); rec.Code != 429 {
		t.Errorf("a second stream: %d %s", rec.Code, rec.Body)
	}
	leave()
	<-done
	if n := l.held(t, state.LeaseStreams, "a"); n != 0 {
		t.Errorf("%d stream slots held after the client left", n)
	}
}

// A submission refused after its slot was taken (an Idempotency-Key reused with
// another body) or answered by a replay leaves no slot behind.
func TestRefusedSubmissionFreesItsSlot(t *testing.T) {
	t.Parallel()
	l := newLimited(t, config.Limits{}, config.Limits{QueuedJobs: 5})
	post := func(key, body string) int {
		req := httptest.NewRequest("POST", "/v1/jobs", strings.NewReader(body)).WithContext(t.Context())
		req.Header.Set("Authorization", "Bearer ka")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		l.h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post("k1", chatBody); code != 202 {
		t.Fatalf("first: %d", code)
	}
	if code := post("k1", chatBody); code != 202 {
		t.Errorf("replay: %d", code)
	}
	if code := post("k1", `{"model":"m1","messages":[{"role":"user","content":"other"}]}`); code != 409 {
		t.Errorf("key reused: %d", code)
	}
	if n := l.held(t, state.LeaseJobs, "a"); n != 1 {
		t.Errorf("%d job slots held, want the one job's", n)
	}
}
