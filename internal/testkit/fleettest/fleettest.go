// Package fleettest starts a whole fleet for a test, in process: an embedded NATS
// JetStream server (its store in t.TempDir()), the real Redis at REDIS_URL under a
// key prefix of the test's own, the provider simulator on a free port, and ingress,
// chat and search workers wired exactly as the binaries wire them.
package fleettest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Fleet is a running test fleet.
type Fleet struct {
	URL    string // ingress base URL
	Sim    *simulator.Server
	SimURL string
	NATS   string
	Store  *state.Store
	File   *config.File
	Env    config.Env
}

// Option adjusts the fleet before it starts.
type Option func(*setup)

// setup is what an Option adjusts: the process settings, the config file and the
// fleet's failpoint.
type setup struct {
	env       *config.Env
	file      *config.File
	failpoint func(name string)
}

// Policy sets webSearch.injectPolicy.
func Policy(p string) Option {
	return func(s *setup) { s.file.WebSearch.InjectPolicy = p }
}

// Env adjusts the process settings.
func Env(fn func(*config.Env)) Option {
	return func(s *setup) { fn(s.env) }
}

// File adjusts the config file, which arrives resolved (demo.Config): a secret fn adds
// goes into its resolved field (Tenant.APIKeys, Tenant.WebhookSecret, …), since the
// fleet reads no environment.
func File(fn func(*config.File)) Option {
	return func(s *setup) { fn(s.file) }
}

// Failpoint sets the fleet's Failpoint (fleet.Options.Failpoint): fp is called at
// each named point of a chat or research step and of the research API, and a panic
// there fails the step or the request as a crash would (a step is redelivered).
func Failpoint(fp func(name string)) Option {
	return func(s *setup) { s.failpoint = fp }
}

// Settings are the test defaults: short timings so redeliveries happen within a test.
func Settings() config.Env {
	return config.Env{
		HTTPAddr: "127.0.0.1:0", JobTimeout: time.Minute, ModelTimeout: 20 * time.Second, EngineTimeout: 10 * time.Second,
		AckWait: 3 * time.Second, ChatConcurrency: 32, BatchConcurrency: 4, SearchConcurrency: 16, MaxHops: 6, MaxSearches: 12,
		MaxBodyBytes: 4 << 20, DrainTimeout: 5 * time.Second, NATSReplicas: 1, Retention: time.Hour, LogLevel: "warn", LogFormat: "text",
		WebhookSchedule: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}, WebhookAllow: []string{"127.0.0.0/8", "::1/128"},
		WebhookTimeout: 5 * time.Second,
	}
}

// Start runs a fleet until the test ends.
func Start(t testing.TB, opts ...Option) *Fleet {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	natsURL := bustest.Server(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })

	env := Settings()
	env.NATSURL, env.KeyPrefix = natsURL, prefix
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	st := setup{env: &env, file: file}
	for _, o := range opts {
		o(&st)
	}
	if err := file.Validate(); err != nil {
		t.Fatal(err)
	}
	url, _ := RunWith(t, env, file, rdb, func(o *fleet.Options) { o.Failpoint = st.failpoint })
	return &Fleet{URL: url, Sim: sim, SimURL: simURL, NATS: natsURL, Store: Store(t, rdb, prefix, natsURL, env.Namespace, env.Retention), File: file, Env: env}
}

// Store is a state store over the keys under prefix that reads ended jobs' records
// from the records bucket of namespace ns on the NATS at natsURL, as the fleet's own
// does (retention as the fleet's FLEET_RETENTION; 0: an hour). The bucket is bound
// when first read: the fleet creates it.
func Store(t testing.TB, rdb redis.UniversalClient, prefix, natsURL, ns string, retention time.Duration) *state.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, natsURL, t.Name()+"-store", slog.New(slog.DiscardHandler), bus.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.RawConn().Close() })
	if retention <= 0 {
		retention = time.Hour
	}
	return state.New(rdb, prefix, retention, state.WithArchive(bus.ReadRecords(b)))
}

// Run runs one fleet process (all roles) with env and file on rdb until the returned
// stop is called or the test ends, and returns ingress's base URL. stop cancels the
// fleet and waits for it (at most env.DrainTimeout plus a margin); calling it again
// does nothing.
func Run(t testing.TB, env config.Env, file *config.File, rdb redis.UniversalClient) (url string, stop func()) {
	t.Helper()
	return RunMetered(t, env, file, rdb, nil)
}

// RunMetered is Run with the process's metrics in m (nil: its own), for a test that
// reads them when the API port serves no /metrics (tenants configured).
func RunMetered(t testing.TB, env config.Env, file *config.File, rdb redis.UniversalClient, m *metrics.Metrics) (url string, stop func()) {
	t.Helper()
	return RunWith(t, env, file, rdb, func(o *fleet.Options) { o.Metrics = m })
}

// startBound bounds a fleet's start: a liveness guard, not a speed check. On a loaded
// two-core machine (load 16, -race, many packages' tests at once) starts took over 20 s.
const startBound = 90 * time.Second

// RunWith is Run with the fleet's options adjusted by adjust (its HTTP client, say).
func RunWith(t testing.TB, env config.Env, file *config.File, rdb redis.UniversalClient, adjust func(*fleet.Options)) (url string, stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	o := fleet.Options{Env: env, File: file, Roles: fleet.Roles{Ingress: true, Chat: true, Search: true},
		Redis: rdb, Log: log, Listening: func(a string) { listening <- a }}
	adjust(&o)
	go func() { done <- fleet.Run(ctx, o) }()
	select {
	case a := <-listening:
		url = "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("fleet did not start: %v", err)
	case <-time.After(startBound):
		cancel()
		t.Fatalf("fleet did not start in %s", startBound)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(env.DrainTimeout + 15*time.Second):
				t.Error("fleet did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return url, stop
}

// Do sends a request to ingress and returns the status and body.
func (f *Fleet) Do(t testing.TB, method, path string, body any) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, f.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// Chat sends one user message to the demo model and returns the decoded response.
func (f *Fleet) Chat(t testing.TB, text string) (int, map[string]any) {
	t.Helper()
	status, b, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{
		"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": text}},
	})
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("response is not JSON (%d): %s", status, b)
	}
	return status, m
}

// Content returns a chat completion's message content.
func Content(resp map[string]any) string {
	ch, _ := resp["choices"].([]any)
	if len(ch) == 0 {
		return ""
	}
	msg, _ := ch[0].(map[string]any)["message"].(map[string]any)
	s, _ := msg["content"].(string)
	return s
}

// Eventually polls cond until it holds or 20s pass.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
