package fleet_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// With the records bucket filled by one tenant (FLEET_RECORDS_MAX_BYTES), the records
// that do not fit stay readable from Redis, that tenant's new jobs are refused with 507
// (it holds more than its share), and another tenant's chat, jobs and search still
// answer.
func TestFullRecordsBucketStopsNoOne(t *testing.T) {
	t.Parallel()
	// A tenant's share (the bound over two tenants) must hold a few jobs in flight:
	// each reserves state.RecordAllowance (64 KB) until its record is settled, so with
	// a 256 KB bound ivy's job still running made her search look over her share.
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.RecordsMaxBytes = 1 << 20 }), fleettest.File(func(c *config.File) {
		quota := config.Limits{StorageBytes: 64 << 20}
		c.Tenants = []config.Tenant{{ID: "filler", APIKeyEnv: "RECFULL_A", APIKeys: []string{"key-filler"}, Limits: quota}, {ID: "ivy", APIKeyEnv: "RECFULL_B", APIKeys: []string{"key-ivy"}, Limits: quota}}
	}))
	// Incompressible text: the bucket is S2-compressed.
	var b strings.Builder
	for i := range 12000 {
		b.WriteString(strings.Repeat(string(rune('a'+i*7%26)), 1+i%5))
		b.WriteString(" ")
	}
	big := b.String()
	var last string
	for i := range 48 {
		status, body, _ := budgetCall(t, f.URL, "/v1/chat/completions", "key-filler", map[string]any{"model": demo.Model,
			"messages": []any{map[string]any{"role": "user", "content": big + " sim:nosearch " + string(rune('A'+i))}}})
		if status == http.StatusInsufficientStorage {
			break // the bucket is full and the filler holds more than its share
		}
		if status != http.StatusOK {
			t.Fatalf("filler's request %d: %d %.300s", i, status, body)
		}
		var r struct {
			ID string `json:"id"`
		}
		json.Unmarshal(body, &r)
		last = strings.TrimPrefix(r.ID, "chatcmpl-")
	}
	fleettest.Eventually(t, "the filler's last record readable", func() bool {
		status, body, _ := budgetCall(t, f.URL, "/v1/jobs/"+last, "key-filler", nil)
		return status == http.StatusOK && strings.Contains(string(body), `"completed"`)
	})
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	fleettest.Eventually(t, "the filler refused with 507", func() bool {
		status, body, _ := budgetCall(t, f.URL, "/v1/chat/completions", "key-filler", map[string]any{"model": demo.Model,
			"messages": []any{map[string]any{"role": "user", "content": "one more sim:nosearch"}}})
		json.Unmarshal(body, &e)
		return status == http.StatusInsufficientStorage && e.Error.Code == "insufficient_storage"
	})
	if status, body, _ := budgetCall(t, f.URL, "/v1/chat/completions", "key-ivy", map[string]any{"model": demo.Model,
		"messages": []any{map[string]any{"role": "user", "content": "hello sim:nosearch"}}}); status != http.StatusOK {
		t.Errorf("ivy's chat with the records bucket full: %d %.300s", status, body)
	}
	if status, body, _ := budgetCall(t, f.URL, "/v1/jobs", "key-ivy", map[string]any{"model": demo.Model,
		"messages": []any{map[string]any{"role": "user", "content": "hello sim:nosearch"}}}); status != http.StatusAccepted {
		t.Errorf("ivy's job with the records bucket full: %d %.300s", status, body)
	}
	if status, body, _ := budgetCall(t, f.URL, "/v1/search", "key-ivy", map[string]any{"query": "tide tables", "engine": "brave"}); status != http.StatusOK {
		t.Errorf("ivy's search with the records bucket full: %d %.300s", status, body)
	}
}
