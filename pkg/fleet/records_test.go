package fleet_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// redisOf is a client of the test fleet's Redis.
func redisOf(t *testing.T) redis.UniversalClient {
	t.Helper()
	rdb, err := state.NewClient(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// keysMemory sums MEMORY USAGE over the keys matching pattern.
func keysMemory(t *testing.T, rdb redis.UniversalClient, pattern string) (n int64, keys []string) {
	t.Helper()
	ctx := context.Background()
	keys, err := testenv.Keys(ctx, rdb, pattern)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		n += rdb.MemoryUsage(ctx, k, 0).Val()
	}
	return n, keys
}

// A finished job keeps about a kilobyte in Redis; its record lives on JetStream. When
// Redis restarts with an empty dataset, GET /v1/jobs/{id}, its request, a replay
// (whose searches are answered from the record) and previous_response_id still work.
func TestRecordsSurviveAnEmptyRedis(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.TenantLimits.StorageBytes = 1 << 30 }))
	c := batchClient{t: t, url: f.URL}
	rdb := redisOf(t)
	prefix := f.Store.K.Prefix()

	pad := strings.Repeat("background notes, ", 50<<10/18)
	status, body := c.do("POST", "/v1/jobs", map[string]any{"model": demo.Model, "messages": []any{
		map[string]any{"role": "user", "content": pad},
		map[string]any{"role": "assistant", "content": "Noted."},
		map[string]any{"role": "user", "content": "Search the web: what is new in Go today? sim:hops=2"}}})
	if status != 202 {
		t.Fatalf("submitting: %d %s", status, body)
	}
	var sub replayView
	json.Unmarshal(body, &sub)
	orig := waitJob(t, c, sub.ID)
	if orig.Status != "completed" || orig.Usage.Searches != 2 {
		t.Fatalf("original: %+v", orig)
	}
	var n int64
	var keys []string
	fleettest.Eventually(t, "the finished job's record to leave Redis", func() bool {
		n, keys = keysMemory(t, rdb, prefix+":{"+orig.ID+"}*")
		if n > 1024 {
			for _, k := range keys {
				t.Logf("%s: %d bytes", k, rdb.MemoryUsage(context.Background(), k, 0).Val())
			}
		}
		return n <= 1024
	})
	t.Logf("the finished job (a %d KB request, two searches) holds %d bytes in Redis: %v", len(pad)>>10, n, keys)
	// Its bytes still count toward the tenant's storage quota, now that they are on
	// JetStream.
	var used, records int64
	fleettest.Eventually(t, "the archived bytes to be charged", func() bool {
		used, records = storageUsed(c)
		return records == 1 && used >= int64(len(pad)) && used < state.RecordAllowance+int64(len(pad))
	})
	t.Logf("storage quota: %d bytes in %d records", used, records)

	// A stored response, for previous_response_id after the flush.
	status, body = c.do("POST", "/v1/responses", map[string]any{"model": demo.Model, "input": "My name is Alice. sim:nosearch"})
	if status != 200 {
		t.Fatalf("responses: %d %s", status, body)
	}
	var first struct{ ID string }
	json.Unmarshal(body, &first)
	fleettest.Eventually(t, "the stored response to leave Redis", func() bool {
		return rdb.Exists(context.Background(), f.Store.K.StoredResponse(first.ID)).Val() == 0
	})
	// The finisher's last writes of a job are its spend per model (counted by the
	// trim, or after it across a cluster's slots) and its record's charge to the
	// storage quota (after the trim): the flush below comes after both jobs' last
	// write, or those keys would come back.
	fleettest.Eventually(t, "both jobs counted in the spend per model and charged", func() bool {
		rows, err := f.Store.Ledger.ModelSpend(context.Background(), "default", 1, time.Now())
		var jobs int64
		for _, r := range rows {
			jobs += r.Jobs
		}
		_, records := storageUsed(c)
		return err == nil && jobs >= 2 && records >= 2
	})

	// Redis restarts with an empty dataset: every key of the fleet is gone.
	_, all := keysMemory(t, rdb, prefix+":*")
	for _, k := range all {
		rdb.Del(context.Background(), k)
	}
	if _, left := keysMemory(t, rdb, prefix+":*"); len(left) != 0 {
		t.Fatalf("%d keys left: %v", len(left), left)
	}

	got := waitJob(t, c, orig.ID)
	a1, t1 := orig.sourceURLs()
	a2, t2 := got.sourceURLs()
	if got.Status != "completed" || !slices.Equal(a1, a2) || !slices.Equal(t1, t2) || len(got.Trace) != 2 {
		t.Fatalf("after the flush: %+v", got)
	}
	status, body = c.do("GET", "/v1/jobs/"+orig.ID+"/request", nil)
	if status != 200 || !strings.Contains(string(body), "what is new in Go today?") || len(body) < 50<<10 {
		t.Fatalf("the job's request after the flush: %d, %d bytes", status, len(body))
	}
	engines := engineRequests(f.Sim.Stats())
	r := replay(t, c, orig.ID)
	a3, _ := r.sourceURLs()
	if r.Status != "completed" || r.Usage.Searches != 0 || !slices.Equal(a1, a3) {
		t.Fatalf("replay after the flush: %+v", r)
	}
	if n := engineRequests(f.Sim.Stats()); n != engines {
		t.Errorf("the replay made %d engine requests", n-engines)
	}
	status, body = c.do("POST", "/v1/responses", map[string]any{"model": demo.Model, "input": "What is my name? sim:nosearch", "previous_response_id": first.ID})
	if status != 200 {
		t.Fatalf("previous_response_id after the flush: %d %s", status, body)
	}
}
