package ingress_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// /readyz answers without a key, so when Redis is down it says so in one stable word;
// the driver's error, with Redis's address, goes to the log only.
func TestReadyzNamesNoAddress(t *testing.T) {
	t.Parallel()
	// A socket path nothing listens on: Redis is down. (A closed TCP port could be
	// taken again by a parallel test's server before the probe dials it.)
	addr := filepath.Join(t.TempDir(), "redis.sock")
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	b, _ := bustest.New(t)
	var logged bytes.Buffer
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(state.New(rdb, "readyz:", time.Hour)), Models: []string{"m1"}, MaxBody: 1 << 20,
		Log: slog.New(slog.NewTextHandler(&logged, nil))})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 503 || !strings.Contains(string(body), `"redis":"unreachable"`) {
		t.Fatalf("%d %s", rec.Code, body)
	}
	if strings.Contains(string(body), addr) || strings.Contains(string(body), "dial") {
		t.Fatalf("readyz shows the error: %s", body)
	}
	if !strings.Contains(logged.String(), addr) {
		t.Fatalf("the log lacks the details: %s", logged.String())
	}
}
