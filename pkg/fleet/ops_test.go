package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// role runs one role process in this process, as its binary would, and returns its
// API address (ingress only) and its internal listener's address.
func role(t *testing.T, roles fleet.Roles, env config.Env, file *config.File, rdb redis.UniversalClient) (apiAddr, opsAddr string) {
	t.Helper()
	env.MetricsAddr = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	ops, listening := make(chan string, 1), make(chan string, 1)
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	go func() {
		done <- fleet.Run(ctx, fleet.Options{Env: env, File: file, Roles: roles, Redis: rdb, Log: log,
			Listening: func(a string) { listening <- a }, MetricsListening: func(a string) { ops <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(env.DrainTimeout + 15*time.Second):
			t.Error("role did not stop")
		}
	})
	for opsAddr == "" || (roles.Ingress && apiAddr == "") {
		select {
		case a := <-ops:
			opsAddr = a
		case a := <-listening:
			apiAddr = a
		case err := <-done:
			t.Fatalf("role %+v did not start: %v", roles, err)
		case <-time.After(90 * time.Second): // a liveness bound: starts took over 20 s at load 16
			t.Fatalf("role %+v did not start in 90s", roles)
		}
	}
	return apiAddr, opsAddr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Every role process (ingress, chat worker, search worker) serves /metrics, /healthz
// and /readyz on FLEET_METRICS_ADDR: /metrics carries the backlog of the consumers the
// process reads and the fleet's queue figures, /readyz says in stable words whether
// NATS and Redis answer. With tenants configured the API port serves no /metrics.
func TestEveryRoleIsObservable(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	nats, err := bus.RunEmbedded("127.0.0.1", -1, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	natsDown := false
	t.Cleanup(func() {
		if !natsDown {
			nats.Shutdown()
		}
	})
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = nats.URL(), prefix
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	file.Tenants = []config.Tenant{{ID: "acme", APIKeyEnv: "OPSTEST_KEY", APIKeys: []string{"ops-key"}}}

	apiAddr, ingressOps := role(t, fleet.Roles{Ingress: true}, env, file, rdb)
	profiled := env
	profiled.Pprof = true // FLEET_PPROF: Go's profiles on the internal listener too
	_, chatOps := role(t, fleet.Roles{Chat: true}, profiled, file, rdb)
	_, searchOps := role(t, fleet.Roles{Search: true}, env, file, rdb)
	if status, _ := get(t, "http://"+chatOps+"/debug/pprof/heap"); status != 200 {
		t.Errorf("FLEET_PPROF set: /debug/pprof/heap %d", status)
	}
	if status, _ := get(t, "http://"+searchOps+"/debug/pprof/heap"); status != 404 {
		t.Errorf("FLEET_PPROF unset: /debug/pprof/heap %d, want 404", status)
	}

	// A job runs through the three processes.
	body, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "Find the latest news about AI"}}})
	req, _ := http.NewRequest("POST", "http://"+apiAddr+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer ops-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}

	consumers := map[string][]string{
		ingressOps: {`stream="WEBHOOKS",consumer="webhooks"`, `stream="EVENTS",consumer="finisher"`, `stream="JOBS",consumer="batch-expander"`},
		chatOps:    {`stream="JOBS",consumer="chatworker"`, `stream="CHAT",consumer="chatworker-resume"`, `stream="DLQ",consumer="deadletters"`},
		searchOps:  {`stream="SEARCH",consumer="searchworker-google"`},
	}
	for addr, want := range consumers {
		if status, b := get(t, "http://"+addr+"/healthz"); status != 200 || !strings.Contains(b, `"ok"`) {
			t.Errorf("%s /healthz: %d %s", addr, status, b)
		}
		if status, b := get(t, "http://"+addr+"/readyz"); status != 200 || !strings.Contains(b, `"nats":"ok"`) || !strings.Contains(b, `"redis":"ok"`) {
			t.Errorf("%s /readyz: %d %s", addr, status, b)
		}
		status, m := get(t, "http://"+addr+"/metrics")
		if status != 200 {
			t.Fatalf("%s /metrics: %d", addr, status)
		}
		for _, labels := range want {
			for _, name := range []string{"fleet_consumer_pending_messages", "fleet_consumer_ack_pending_messages"} {
				if !strings.Contains(m, name+"{"+labels+"}") && !strings.Contains(m, name+"{"+swap(labels)+"}") {
					t.Errorf("%s /metrics has no %s{%s}", addr, name, labels)
				}
			}
		}
		for _, line := range []string{"fleet_dlq_messages 0", `fleet_oldest_queued_job_age_seconds{queue="chat"}`, "fleet_unfinished_jobs", "fleet_queue_metrics_up 1"} {
			if !strings.Contains(m, line) {
				t.Errorf("%s /metrics has no %q", addr, line)
			}
		}
	}
	// The search ran in the search process, and its engine metrics are there.
	if _, m := get(t, "http://"+searchOps+"/metrics"); !strings.Contains(m, `fleet_searches_total{engine="google",outcome="ok"} 1`) {
		t.Errorf("search process metrics lack the search:\n%s", grepLines(m, "fleet_searches_total"))
	}
	// Tenants make the API port public: no metrics there.
	if status, _ := get(t, "http://"+apiAddr+"/metrics"); status != http.StatusNotFound {
		t.Errorf("API-port /metrics with tenants: %d, want 404", status)
	}

	// NATS goes away: every process says so, in the stable word.
	nats.Shutdown()
	natsDown = true
	for _, addr := range []string{ingressOps, chatOps, searchOps} {
		fleettest.Eventually(t, addr+" /readyz unavailable", func() bool {
			status, b := get(t, "http://"+addr+"/readyz")
			return status == http.StatusServiceUnavailable && strings.Contains(b, `"nats":"unreachable"`) && strings.Contains(b, `"redis":"ok"`)
		})
		if status, _ := get(t, "http://"+addr+"/healthz"); status != 200 {
			t.Errorf("%s /healthz %d while NATS is down: the process itself is alive", addr, status)
		}
	}
}

// swap writes stream/consumer labels in either order (Prometheus sorts them).
func swap(labels string) string {
	a, b, _ := strings.Cut(labels, ",")
	return b + "," + a
}

// /readyz names an unreachable Redis with the stable word and no error text.
func TestReadyzRedisUnreachable(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	ops := &ingress.Ops{Bus: b, Store: state.New(dead, "sftest-ops", time.Hour), Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler)}
	rec := httptest.NewRecorder()
	ops.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, `"redis":"unreachable"`) || !strings.Contains(body, `"nats":"ok"`) {
		t.Fatalf("/readyz: %d %s", rec.Code, body)
	}
	if strings.Contains(body, "127.0.0.1") || strings.Contains(body, "refused") || strings.Contains(body, "dial") {
		t.Errorf("/readyz leaks the error: %s", body)
	}
}
