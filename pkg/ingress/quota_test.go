package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// quotaFleet is an ingress (no workers: submitted jobs stay queued) with tenants "a"
// (key ka, a 4 MiB storage quota) and "b" (key kb, the default quota), over a store
// keeping records for retention.
type quotaFleet struct {
	storage
	s      *ingress.Server
	store  *state.Store
	rdb    redis.UniversalClient
	prefix string
	m      *metrics.Metrics
}

func newQuotaFleet(t *testing.T, retention time.Duration) *quotaFleet {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, retention)
	tenants := []config.Tenant{{ID: "a", APIKeys: []string{"ka"}, Limits: config.Limits{StorageBytes: 4 << 20}}, {ID: "b", APIKeys: []string{"kb"}}}
	keys, err := ingress.NewTenants(tenants)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	def := config.Limits{StorageBytes: 256 << 20, QueuedJobs: 1000}
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: 8 << 20, Log: slog.New(slog.DiscardHandler), Tenants: keys,
		Limits: config.NewTenantLimits(def, tenants), Metrics: m, JobTimeout: time.Minute, SyncWait: time.Second})
	return &quotaFleet{storage: storage{h: s.Handler()}, s: s, store: store, rdb: rdb, prefix: prefix, m: m}
}

// submit posts a background job whose request holds n bytes of text.
func (q *quotaFleet) submit(t *testing.T, key string, n int) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "m1", "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("x", n)}}})
	code, _, out := q.do(t, key, "POST", "/v1/jobs", "application/json", body)
	return code, out
}

type storageReport struct {
	UsedBytes  int64  `json:"used_bytes"`
	LimitBytes *int64 `json:"limit_bytes"`
	Records    int64  `json:"records"`
}

func (q *quotaFleet) usage(t *testing.T, key string) storageReport {
	t.Helper()
	code, _, body := q.do(t, key, "GET", "/v1/usage", "", nil)
	var u struct {
		Storage storageReport `json:"storage"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &u) != nil {
		t.Fatalf("GET /v1/usage: %d %s", code, body)
	}
	return u.Storage
}

// redisBytes is what tenant's job records take in Redis (MEMORY USAGE of each).
func (q *quotaFleet) redisBytes(t *testing.T, tenant string) int64 {
	t.Helper()
	ctx := t.Context()
	keys, err := testenv.Keys(ctx, q.rdb, q.prefix+":*") // every master of a cluster
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, k := range keys {
		if !strings.HasSuffix(k, ":job") {
			continue
		}
		if who, _ := q.rdb.HGet(ctx, k, "tenant").Result(); who != tenant {
			continue
		}
		n, _ := q.rdb.MemoryUsage(ctx, k, 0).Result()
		total += n
	}
	return total
}

// One tenant submitting 1 MiB jobs is refused at its 4 MiB storage quota (429 in each
// protocol's shape, 413 for a request larger than the quota), and the Redis memory its
// records take stops growing there; another tenant is unaffected. GET /v1/usage
// reports the use and the limit; refusals are counted.
func TestStorageQuotaBoundsATenantsRecords(t *testing.T) {
	t.Parallel()
	q := newQuotaFleet(t, time.Hour)
	accepted := 0
	for range 3 {
		if code, body := q.submit(t, "ka", 1<<20); code != http.StatusAccepted {
			t.Fatalf("job %d within the quota: %d %s", accepted, code, body)
		}
		accepted++
	}
	u := q.usage(t, "ka")
	if u.LimitBytes == nil || *u.LimitBytes != 4<<20 || u.UsedBytes < 3<<20 || u.UsedBytes > 4<<20 || u.Records != 3 {
		t.Fatalf("usage after three jobs: %+v", u)
	}
	atQuota := q.redisBytes(t, "a")
	for i := range 10 {
		code, body := q.submit(t, "ka", 1<<20)
		if code != http.StatusTooManyRequests || !strings.Contains(body, `"code":"storage_quota_exceeded"`) || !strings.Contains(body, `"type":"insufficient_quota"`) {
			t.Fatalf("job %d over the quota: %d %s", i, code, body)
		}
	}
	grown := q.redisBytes(t, "a")
	t.Logf("tenant a's job records in Redis: %d bytes at its quota, %d after 10 refused 1 MiB submissions", atQuota, grown)
	if grown > atQuota {
		t.Errorf("tenant a's records grew from %d to %d bytes in Redis after its quota was reached", atQuota, grown)
	}
	if atQuota > 5<<20 {
		t.Errorf("tenant a's records take %d bytes in Redis, over its 4 MiB quota", atQuota)
	}
	// Each protocol refuses in its own shape.
	chat, _ := json.Marshal(map[string]any{"model": "m1", "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("y", 1<<20)}}})
	if code, _, body := q.do(t, "ka", "POST", "/v1/chat/completions", "application/json", chat); code != 429 || !strings.Contains(body, `"error":{`) || !strings.Contains(body, "storage quota") {
		t.Errorf("chat over the quota: %d %s", code, body)
	}
	msg, _ := json.Marshal(map[string]any{"model": "m1", "max_tokens": 10, "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("y", 1<<20)}}})
	if code, _, body := q.do(t, "ka", "POST", "/v1/messages", "application/json", msg); code != 429 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, `"type":"rate_limit_error"`) {
		t.Errorf("messages over the quota: %d %s", code, body)
	}
	if code, body := q.submit(t, "ka", 5<<20); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than the tenant's storage quota") {
		t.Errorf("a request larger than the quota: %d %s", code, body)
	}
	if n := testutil.ToFloat64(q.m.TenantRejected.WithLabelValues("a", "storage_bytes")); n != 13 {
		t.Errorf("fleet_tenant_rejected_total{limit=storage_bytes} = %v, want 13", n)
	}

	// Tenant b is unaffected.
	for i := range 5 {
		if code, body := q.submit(t, "kb", 1<<20); code != http.StatusAccepted {
			t.Fatalf("tenant b's job %d: %d %s", i, code, body)
		}
	}
	if u := q.usage(t, "kb"); u.Records != 5 || u.LimitBytes == nil || *u.LimitBytes != 256<<20 {
		t.Errorf("tenant b's usage %+v", u)
	}
}

// A job's bytes come back when its record expires (lazily, at the tenant's next quota
// call) and when an unaccepted job is dropped; an ended job is charged its real size
// (record, chain, recorded searches) and the search results kept only for a running
// job's redelivered searches are dropped.
func TestStorageQuotaReleasesOnExpiryAndDelete(t *testing.T) {
	t.Parallel()
	q := newQuotaFleet(t, 5*time.Second)
	for range 3 {
		if code, body := q.submit(t, "ka", 1<<20); code != http.StatusAccepted {
			t.Fatalf("job: %d %s", code, body)
		}
	}
	if u := q.usage(t, "ka"); u.UsedBytes < 1<<20 {
		t.Fatalf("usage after three jobs kept for 5 s: %+v", u)
	}
	waitFor(t, "the expired records' bytes to come back", func() bool {
		u := q.usage(t, "ka")
		return u.UsedBytes == 0 && u.Records == 0
	})
	if code, body := q.submit(t, "ka", 1<<20); code != http.StatusAccepted {
		t.Fatalf("a job after the records expired: %d %s", code, body)
	}

	// An ended job is charged what it keeps.
	ctx := context.Background()
	long := state.New(q.rdb, q.prefix, time.Hour)
	job := &state.Job{ID: state.NewID("job_"), Tenant: "a", Kind: "chat", Model: "m1", Request: json.RawMessage(`{"model":"m1"}`), Created: time.Now()}
	if err := long.Jobs.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	if _, _, err := long.Chains.RecordResult(ctx, job.ID, 0, "c1", []byte(strings.Repeat("r", 10000))); err != nil {
		t.Fatal(err)
	}
	if err := long.Searches.SaveSearchDone(ctx, job.ID, 0, "c1", []byte(strings.Repeat("r", 10000)), nil); err != nil {
		t.Fatal(err)
	}
	before := q.usage(t, "ka").UsedBytes
	if _, err := long.Jobs.Finish(ctx, job.ID, state.Completed, "response", json.RawMessage(fmt.Sprintf("%q", strings.Repeat("a", 50000)))); err != nil {
		t.Fatal(err)
	}
	ended, err := long.Jobs.GetJob(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.s.JobFinished(ctx, ended); err != nil {
		t.Fatal(err)
	}
	if got := q.usage(t, "ka").UsedBytes - before; got < 60000 || got > 62000 {
		t.Errorf("an ended job of ~60 KB was charged %d bytes", got)
	}
	if st, err := long.Searches.StartSearch(ctx, job.ID, 0, "c1", "w", time.Second); err != nil || st.Done != nil {
		t.Errorf("an ended job keeps its search worker's copy of a result the chain holds (%v)", err)
	}
	// An unaccepted job (not ended, its record deleted) gives its charge back.
	before = q.usage(t, "ka").UsedBytes
	if err := q.s.JobFinished(ctx, &state.Job{ID: job.ID, Tenant: "a"}); err != nil {
		t.Fatal(err)
	}
	if got := before - q.usage(t, "ka").UsedBytes; got < 60000 {
		t.Errorf("a dropped job gave back %d bytes", got)
	}
}
