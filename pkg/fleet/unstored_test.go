package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A store: false response, answered whole or streamed, keeps only its job's summary
// once answered: Redis holds the short record (no request, answer, trace, chain or
// recorded searches), nothing is archived, and the tenant is charged that alone.
func TestStoreFalseKeepsOnlyTheSummary(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.TenantLimits.StorageBytes = 1 << 30 }))
	c := batchClient{t: t, url: f.URL}
	rdb := redisOf(t)
	ctx := context.Background()
	pad := strings.Repeat("background notes, ", 20<<10/18)
	for _, stream := range []bool{false, true} {
		status, body := c.do("POST", "/v1/responses", map[string]any{"model": demo.Model, "store": false, "stream": stream,
			"input": pad + " Search the web: what is new in Go today? sim:hops=1"})
		if status != 200 || !strings.Contains(string(body), "output_text") {
			t.Fatalf("store: false (stream %v): %d %.300s", stream, status, body)
		}
		id := responseID(t, body, stream)
		fleettest.Eventually(t, "only the summary to stay", func() bool {
			m := rdb.HGetAll(ctx, f.Store.K.Job(id)).Val()
			if m["cold"] != "0" || m["sum.0"] == "" || m["status"] != "completed" {
				return false
			}
			for k := range m {
				if k == "request" || k == "response" || k == "usage" || k == "trace" || k == "question" || strings.Contains(k, ":") {
					return false
				}
			}
			n, _ := keysMemory(t, rdb, f.Store.K.Prefix()+":{"+id+"}*")
			return n <= 1024
		})
		// The record reads without its request or answer.
		j, err := f.Store.Jobs.GetJob(ctx, id)
		if err != nil || j.Request != nil || j.Response != nil {
			t.Fatalf("GET the job: %+v %v", j, err)
		}
		// Nothing archived: without its Redis record the job is not found at all.
		rdb.Del(ctx, f.Store.K.Job(id))
		if _, err := f.Store.Jobs.GetJob(ctx, id); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("a store: false job's record was archived: %v", err)
		}
	}
	fleettest.Eventually(t, "the tenant charged the summaries only, their spend counted", func() bool {
		used, records := storageUsed(c)
		rows, err := f.Store.Ledger.ModelSpend(ctx, "default", 1, time.Now())
		var jobs int64
		for _, r := range rows {
			jobs += r.Jobs
		}
		return records == 2 && used < 4096 && err == nil && jobs == 2
	})
}

// storageUsed is the storage GET /v1/usage reports: the bytes charged and the
// records holding them.
func storageUsed(c batchClient) (used, records int64) {
	var usage struct {
		Storage struct {
			UsedBytes int64 `json:"used_bytes"`
			Records   int64 `json:"records"`
		} `json:"storage"`
	}
	_, body := c.do("GET", "/v1/usage", nil)
	json.Unmarshal(body, &usage)
	return usage.Storage.UsedBytes, usage.Storage.Records
}

// responseID is the id of a Responses answer: the body's, or a stream's first event's.
func responseID(t *testing.T, body []byte, stream bool) string {
	t.Helper()
	if stream {
		_, data, _ := strings.Cut(string(body), "data: ")
		data, _, _ = strings.Cut(data, "\n")
		body = []byte(data)
	}
	var r struct {
		ID       string `json:"id"`
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.ID+r.Response.ID == "" {
		t.Fatalf("no response id in %.300s", body)
	}
	return r.ID + r.Response.ID
}
