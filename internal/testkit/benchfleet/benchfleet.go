// Package benchfleet starts the whole fleet in one process for the end-to-end
// benchmarks (cmd/fleetbench, cmd/batchbench): ingress, chat and search workers wired
// by fleet.Run with the production defaults of every setting (overridden by FLEET_*
// variables, so settings can be tried), an embedded NATS JetStream server reached in
// process, the real Redis at REDIS_URL under a key prefix of its own (deleted after),
// and the provider simulator.
package benchfleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/redis/go-redis/v9"
	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Options configure the benchmark fleet.
type Options struct {
	// Memory keeps the streams in memory instead of on disk.
	Memory bool
	// ModelLatency and EngineLatency are added by the simulator to every answer;
	// with ModelLatencyMax and EngineLatencyMax above them, each answer's latency is
	// drawn between the two (simulator.Options).
	ModelLatency, EngineLatency       time.Duration
	ModelLatencyMax, EngineLatencyMax time.Duration
	// File, if set, adjusts the fleet's configuration (tenants, for instance).
	File func(*config.File)
}

// Fleet is a running benchmark fleet.
type Fleet struct {
	URL     string // ingress base URL
	Sim     *simulator.Server
	SimURL  string // the simulator's base URL
	NATSURL string
	Env     config.Env
	Metrics *metrics.Metrics
	Redis   redis.UniversalClient
	// Counter counts the commands and round trips of the fleet's Redis client.
	Counter *RedisCounter
	// Stats is a second client on the same Redis for reading INFO, so the readings
	// are not counted as the fleet's.
	Stats   redis.UniversalClient
	Storage string // "file" or "memory"
	stop    func()
}

// Start runs the fleet until Stop.
func Start(ctx context.Context, o Options) (*Fleet, error) {
	environ := map[string]string{}
	for _, kv := range config.UnlimitedTenantEnv() { // benchmarks measure the fleet, not its per-tenant limits
		k, v, _ := strings.Cut(kv, "=")
		environ[k] = v
	}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "FLEET_") {
			environ[k] = v
		}
	}
	e, err := env.ParseAsWithOptions[config.Env](env.Options{Environment: environ})
	if err != nil {
		return nil, err
	}
	rdb, err := cli.Redis(ctx, testenv.RedisURL())
	if err != nil {
		return nil, err
	}
	counter := NewRedisCounter()
	rdb.AddHook(counter)
	stats, err := state.NewClient(testenv.RedisURL())
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("sfbench:%d", time.Now().UnixNano())
	dir, err := os.MkdirTemp("", "benchfleet-nats")
	if err != nil {
		return nil, err
	}
	var nats *bus.Embedded
	Labeled("nats", func() { nats, err = bus.RunEmbedded("127.0.0.1", -1, dir) })
	if err != nil {
		return nil, err
	}
	sim := simulator.New(simulator.Options{ModelLatency: o.ModelLatency, EngineLatency: o.EngineLatency,
		ModelLatencyMax: o.ModelLatencyMax, EngineLatencyMax: o.EngineLatencyMax})
	var hs *http.Server
	var simURL string
	Labeled("simulator", func() { hs, simURL, err = sim.Listen("127.0.0.1:0") })
	if err != nil {
		return nil, err
	}
	os.Setenv(demo.KeyEnv, "sim-key")
	e.HTTPAddr, e.NATSURL, e.KeyPrefix, e.Retention, e.LogLevel = "127.0.0.1:0", nats.URL(), prefix, time.Hour, "error"
	if err := e.Validate(); err != nil {
		return nil, err
	}
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	if o.File != nil {
		o.File(file)
	}
	if err := file.Validate(); err != nil {
		return nil, err
	}
	m := metrics.New()
	fctx, cancel := context.WithCancel(ctx)
	listening, ended := make(chan string, 1), make(chan struct{}) // ended: closed when Run has returned
	var runErr error
	go pprof.Do(fctx, pprof.Labels("part", "fleet"), func(fctx context.Context) {
		defer close(ended)
		runErr = fleet.Run(fctx, fleet.Options{Env: e, File: file,
			Roles: fleet.Roles{Ingress: true, Chat: true, Search: true}, Redis: rdb, Metrics: m,
			Log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
			Memory: o.Memory, Embedded: nats, Listening: func(a string) { listening <- a }})
	})
	f := &Fleet{NATSURL: nats.URL(), Sim: sim, SimURL: simURL, Env: e, Metrics: m, Redis: rdb, Counter: counter, Stats: stats, Storage: "file"}
	if o.Memory {
		f.Storage = "memory"
	}
	f.stop = func() {
		cancel()
		<-ended
		hs.Close()
		nats.Shutdown()
		os.RemoveAll(dir)
		DeleteKeys(rdb, prefix)
		rdb.Close()
		stats.Close()
	}
	select {
	case a := <-listening:
		f.URL = "http://" + a
		return f, nil
	case <-ended:
		f.stop()
		return nil, runErr
	}
}

// Labeled runs f with the CPU profiler's label part=name, which every goroutine f
// starts inherits, so that a profile of the one benchmark process splits into the
// fleet, its NATS server, the simulator and the load generator
// (go tool pprof -tags, or -tagfocus part=fleet).
func Labeled(name string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("part", name), func(context.Context) { f() })
}

// Stop stops the fleet and deletes its Redis keys.
func (f *Fleet) Stop() { f.stop() }

// DeleteKeys deletes a benchmark's Redis keys: those under prefix, namespaced ones
// (prefix@<ns>) included.
func DeleteKeys(rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	var keys []string
	for _, pattern := range []string{prefix + ":*", prefix + "@*"} {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 1000 {
				rdb.Del(ctx, keys...)
				keys = keys[:0]
			}
		}
	}
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
}

// Ints reads a comma-separated list of positive numbers ("1,2,4"), skipping others.
func Ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Pct is the p-th percentile of l (nearest rank), 0 for none.
func Pct(l []time.Duration, p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p/100)]
}

// Machine describes the machine the benchmark runs on.
func Machine() string {
	model := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s %s/%s", model, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// FirstToken sends one streaming chat request for model to the chat completions
// endpoint at base (the fleet's, or the simulator's own) and returns the time to the
// first chunk with answer text, reading the stream to its end. An answer that does not
// stream text is an error.
func FirstToken(ctx context.Context, hc *http.Client, base, model, question string) (time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "stream": true, "messages": Messages(question)})
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	var first time.Duration
	err = llm.ReadSSE(resp.Body, func(_ string, data []byte) error {
		if first == 0 && bytes.Contains(data, []byte(`"content":"`)) && !bytes.Contains(data, []byte(`"content":""`)) {
			first = time.Since(start)
		}
		return nil
	})
	if err == nil && first == 0 {
		err = fmt.Errorf("no text in the stream")
	}
	return first, err
}
