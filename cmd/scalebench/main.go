// Command scalebench measures how the fleet scales out: throughput with 1, 2 and 4
// search-worker processes (engine latency 300 ms) and with 1, 2 and 4 chat-worker
// processes (model latency 1 s), each run saturated by a closed loop of outstanding
// jobs; and how many model calls one chat worker holds in flight per GB of its
// resident memory (each call a step whose handler waits on Go's net/http client).
//
// Every role runs as its own process (the binaries are built first); NATS JetStream
// is embedded in this process, Redis is REDIS_URL, and the provider simulator runs
// here too. All traffic stays on 127.0.0.1, and every run is bounded in time.
//
//	go run ./cmd/scalebench                      # the default sweep (~4 min)
//	go run ./cmd/scalebench -inflight 10000      # also model calls in flight per GB
//	go run ./cmd/scalebench -search-workers= -chat-workers= -inflight 10000 -inflight-over https
//	                                             # only that, against an HTTPS provider (~15 s)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/benchfleet"
	"github.com/searchfleet/searchfleet/internal/testkit/chaos"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
)

func main() { cli.Main(parseAndRun) }

func parseAndRun(ctx context.Context) error {
	searchN := flag.String("search-workers", "1,2,4", "search-worker process counts to measure")
	chatM := flag.String("chat-workers", "1,2,4", "chat-worker process counts to measure")
	searchC := flag.Int("search-concurrency", 16, "FLEET_SEARCH_CONCURRENCY of each search worker")
	chatC := flag.Int("chat-concurrency", 32, "FLEET_CHAT_CONCURRENCY of each chat worker in the chat sweep")
	engineLat := flag.Duration("engine-latency", 300*time.Millisecond, "simulated engine latency")
	modelLat := flag.Duration("model-latency", time.Second, "simulated model latency")
	warmup := flag.Duration("warmup", 5*time.Second, "time before measuring")
	duration := flag.Duration("duration", 15*time.Second, "measured time per run")
	inflight := flag.Int("inflight", 0, "if set, also hold this many model calls in flight on one chat worker and report its RSS and the calls it holds per GB")
	flag.Parse()
	return run(ctx, opts{searchN: benchfleet.Ints(*searchN), chatM: benchfleet.Ints(*chatM), searchC: *searchC, chatC: *chatC,
		engineLat: *engineLat, modelLat: *modelLat, warmup: *warmup, duration: *duration, inflight: *inflight})
}

type opts struct {
	searchN, chatM      []int
	searchC, chatC      int
	engineLat, modelLat time.Duration
	warmup, duration    time.Duration
	inflight            int
}

func run(ctx context.Context, o opts) error {
	dir, err := os.MkdirTemp("", "scalebench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Println("building the role binaries…")
	bins, err := chaos.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	fmt.Printf("machine: %d CPUs; engine latency %s, model latency %s; %s measured after %s warm-up per run\n\n",
		runtime.NumCPU(), o.engineLat, o.modelLat, o.duration, o.warmup)

	fmt.Printf("search workers (each FLEET_SEARCH_CONCURRENCY=%d; 2 chat workers, one search per job):\n", o.searchC)
	fmt.Println("  N  jobs/s  searches/s  per-worker ceiling  scaling vs N=1")
	var base float64
	for _, n := range o.searchN {
		r, err := measure(ctx, dir, bins, o, scenario{search: n, chat: 2, searchC: o.searchC, chatC: 1024, text: "Search the web: scale item %d? sim:engine=brave"})
		if err != nil {
			return err
		}
		ceiling := float64(o.searchC) / o.engineLat.Seconds()
		if base == 0 {
			base = r.perSec / float64(n)
		}
		fmt.Printf("  %d  %6.1f  %10.1f  %18.1f  %13.0f%%\n", n, r.perSec, r.searchesPerSec, ceiling*float64(n), 100*r.perSec/(base*float64(n)))
	}

	fmt.Printf("\nchat workers (each FLEET_CHAT_CONCURRENCY=%d; no search: one model call per job):\n", o.chatC)
	fmt.Println("  M  jobs/s  per-worker ceiling  scaling vs M=1")
	base = 0
	for _, m := range o.chatM {
		r, err := measure(ctx, dir, bins, o, scenario{search: 1, chat: m, searchC: o.searchC, chatC: o.chatC, text: "Say hello %d sim:nosearch"})
		if err != nil {
			return err
		}
		ceiling := float64(o.chatC) / o.modelLat.Seconds()
		if base == 0 {
			base = r.perSec / float64(m)
		}
		fmt.Printf("  %d  %6.1f  %18.1f  %13.0f%%\n", m, r.perSec, ceiling*float64(m), 100*r.perSec/(base*float64(m)))
	}

	if o.inflight > 0 {
		fmt.Printf("\nmodel calls in flight on one chat worker, over net/http (model latency 90s, nothing finishes while measured):\n")
		for _, tls := range []bool{false, true} {
			if *inflightOver != "both" && *inflightOver != map[bool]string{false: "http", true: "https"}[tls] {
				continue
			}
			if err := holdInFlight(ctx, dir, bins, o.inflight, tls); err != nil {
				return err
			}
		}
	}
	return nil
}

type scenario struct {
	search, chat   int
	searchC, chatC int
	text           string // a job's user message, %d the job number
	modelLat       time.Duration
	window         int // jobs kept outstanding (0: derived)
	// tls serves the simulator over HTTPS (a throwaway certificate the processes
	// trust through SSL_CERT_FILE), so the fleet reaches it as it reaches real
	// providers: HTTP/2, many calls multiplexed on few connections.
	tls bool
	// chatMetrics, if set, is the chat worker's FLEET_METRICS_ADDR.
	chatMetrics string
}

type result struct {
	perSec, searchesPerSec float64
}

// world is one run's servers and processes.
type world struct {
	sim   *simulator.Server
	api   *benchfleet.Client // the ingress
	nc    *nats.Conn
	procs []*exec.Cmd
	stop  func()
}

func start(ctx context.Context, dir string, bins chaos.Binaries, o opts, sc scenario) (*world, error) {
	run := filepath.Join(dir, fmt.Sprintf("run-%d", time.Now().UnixNano()))
	emb, err := bus.RunEmbedded("127.0.0.1", -1, filepath.Join(run, "nats"))
	if err != nil {
		return nil, err
	}
	lat := o.modelLat
	if sc.modelLat > 0 {
		lat = sc.modelLat
	}
	sim := simulator.New(simulator.Options{ModelLatency: lat, EngineLatency: o.engineLat})
	var closeSim func()
	var simURL, caFile string
	if sc.tls {
		caFile = filepath.Join(run, "sim-ca.pem")
		if err := os.MkdirAll(run, 0o755); err != nil {
			return nil, err
		}
		ts, err := chaos.ServeTLS(sim, caFile)
		if err != nil {
			return nil, err
		}
		closeSim, simURL = ts.Close, ts.URL
	} else {
		hs, u, err := sim.Listen("127.0.0.1:0")
		if err != nil {
			emb.Shutdown()
			return nil, err
		}
		closeSim = func() { hs.Close() }
		simURL = u
	}
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	b, _ := json.Marshal(file)
	cfg := filepath.Join(run, "fleet.json")
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		return nil, err
	}
	rdb, err := state.Dial(ctx, testenv.RedisURL(), 5*time.Second)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("sfscale:%d", time.Now().UnixNano())
	w := &world{sim: sim}
	env := []string{"NATS_URL=" + emb.URL(), "REDIS_URL=" + testenv.RedisURL(), "FLEET_REDIS_PREFIX=" + prefix, "FLEET_CONFIG=" + cfg,
		"FLEET_LOG_LEVEL=error", "FLEET_JOB_TIMEOUT=10m", "FLEET_MODEL_TIMEOUT=5m", demo.KeyEnv + "=sim-key",
		"FLEET_CHAT_MAX_IN_FLIGHT=" + strconv.Itoa(max(4096, sc.chat*sc.chatC)), "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	env = append(env, config.UnlimitedTenantEnv()...) // the fleet's capacity is measured, not its per-tenant limits
	if caFile != "" {
		env = append(env, "SSL_CERT_FILE="+caFile)
	}
	for _, k := range []string{"GOGC", "GOMEMLIMIT", "GODEBUG"} { // the Go runtime's settings reach the processes
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	startProc := func(bin string, extra ...string) error {
		cmd := exec.Command(bin)
		cmd.Env = append(append([]string(nil), env...), extra...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		w.procs = append(w.procs, cmd)
		return nil
	}
	w.stop = func() {
		for _, p := range w.procs {
			p.Process.Signal(syscall.SIGKILL)
			p.Wait()
		}
		if w.nc != nil {
			w.nc.Close()
		}
		closeSim()
		emb.Shutdown()
		benchfleet.DeleteKeys(rdb, prefix)
		rdb.Close()
		os.RemoveAll(run)
	}
	addr, err := chaos.FreeAddr()
	if err != nil {
		w.stop()
		return nil, err
	}
	if err := startProc(bins.Ingress, "FLEET_HTTP_ADDR="+addr); err != nil {
		w.stop()
		return nil, err
	}
	for range sc.chat {
		extra := []string{"FLEET_CHAT_CONCURRENCY=" + strconv.Itoa(sc.chatC)}
		if sc.chatMetrics != "" {
			extra = append(extra, "FLEET_METRICS_ADDR="+sc.chatMetrics, "FLEET_PPROF=1")
		}
		if err := startProc(bins.ChatWorker, extra...); err != nil {
			w.stop()
			return nil, err
		}
	}
	for range sc.search {
		if err := startProc(bins.SearchWorker, "FLEET_ENGINES=brave", "FLEET_SEARCH_CONCURRENCY="+strconv.Itoa(sc.searchC)); err != nil {
			w.stop()
			return nil, err
		}
	}
	w.api = &benchfleet.Client{Base: "http://" + addr, HTTP: http.DefaultClient}
	if err := benchfleet.WaitReady(ctx, w.api.Base, 30*time.Second); err != nil {
		w.stop()
		return nil, err
	}
	if w.nc, err = nats.Connect(emb.URL()); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

// measure runs a closed loop: a window of outstanding jobs, a new one submitted for
// every job that ends, and counts the ends of the measured period.
func measure(ctx context.Context, dir string, bins chaos.Binaries, o opts, sc scenario) (result, error) {
	w, err := start(ctx, dir, bins, o, sc)
	if err != nil {
		return result{}, err
	}
	defer w.stop()
	window := sc.window
	if window == 0 {
		// Enough outstanding jobs to keep every worker busy: twice the jobs that can
		// be in the fleet at the capacity the run is expected to reach.
		capacity := min(float64(sc.search*sc.searchC)/o.engineLat.Seconds(), float64(sc.chat*sc.chatC)/o.modelLat.Seconds())
		window = int(2*capacity*(2*o.modelLat.Seconds()+o.engineLat.Seconds())) + 32
	}
	ends := make(chan struct{}, 4*window)
	sub, err := w.nc.Subscribe(bus.SubjectEndsAll, func(*nats.Msg) { ends <- struct{}{} })
	if err != nil {
		return result{}, err
	}
	defer sub.Unsubscribe()
	var seq atomic.Int64
	// The window is filled by a few submitters; every end then makes room for one more.
	tokens := make(chan struct{}, window)
	for range window {
		tokens <- struct{}{}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-rctx.Done():
					return
				case <-tokens:
					w.api.SubmitUntilAccepted(ctx, fmt.Sprintf(sc.text, seq.Add(1)))
				}
			}
		}()
	}
	var counted atomic.Int64
	measuring := atomic.Bool{}
	go func() {
		for {
			select {
			case <-rctx.Done():
				return
			case <-ends:
				if measuring.Load() {
					counted.Add(1)
				}
				select {
				case tokens <- struct{}{}:
				default:
				}
			}
		}
	}()
	select {
	case <-time.After(o.warmup):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	measuring.Store(true)
	t0, s0 := time.Now(), w.sim.Stats().Requests["brave"]
	select {
	case <-time.After(o.duration):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	n, s1 := counted.Load(), w.sim.Stats().Requests["brave"]
	elapsed := time.Since(t0)
	cancel()
	wg.Wait()
	return result{perSec: float64(n) / elapsed.Seconds(), searchesPerSec: float64(s1-s0) / elapsed.Seconds()}, nil
}

// holdInFlight submits n jobs to one chat worker whose model answers after 90 s, waits
// until the simulator holds all n model calls, and reads the worker's resident memory:
// what each call in flight costs (its step's handler waiting on net/http), and so how
// many calls one GB holds. The worker's concurrency is n + 64, so every call gets a
// place. With tls the model is reached over HTTPS and HTTP/2, as real providers are;
// without, over plain HTTP/1.1, one connection per call.
func holdInFlight(ctx context.Context, dir string, bins chaos.Binaries, n int, tls bool) error {
	o := opts{engineLat: 300 * time.Millisecond, modelLat: 90 * time.Second}
	metricsAddr, err := chaos.FreeAddr()
	if err != nil {
		return err
	}
	w, err := start(ctx, dir, bins, o, scenario{search: 1, chat: 1, searchC: 16, chatC: n + 64, modelLat: o.modelLat, tls: tls, chatMetrics: metricsAddr})
	if err != nil {
		return err
	}
	defer w.stop()
	chat := w.procs[1]
	idle := rssMB(chat.Process.Pid)
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				w.api.SubmitUntilAccepted(ctx, fmt.Sprintf("Hold %d sim:nosearch", i))
			}
		}()
	}
	wg.Wait()
	submitted := time.Since(t0)
	deadline := time.Now().Add(80 * time.Second)
	for w.sim.Stats().Requests["model"] < int64(n) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("only %d of %d model calls in flight after 80s", w.sim.Stats().Requests["model"], n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	held := w.sim.Stats().Requests["model"]
	rss := rssMB(chat.Process.Pid)
	rt := runtimeStats(metricsAddr)
	if *heapDir != "" {
		name := filepath.Join(*heapDir, fmt.Sprintf("chatworker-heap-%v.pb.gz", map[bool]string{false: "http1", true: "http2"}[tls]))
		if err := saveProfile(metricsAddr, "heap", name); err != nil {
			return err
		}
		fmt.Printf("  heap profile: %s (go tool pprof -top -inuse_space %s)\n", name, name)
		gname := strings.Replace(name, "-heap-", "-goroutines-", 1)
		gname = strings.TrimSuffix(gname, ".pb.gz") + ".txt"
		if err := saveProfile(metricsAddr, "goroutine?debug=1", gname); err != nil {
			return err
		}
		fmt.Printf("  goroutines: %s\n", gname)
	}
	proto := "plain HTTP/1.1"
	if tls {
		proto = "HTTPS, HTTP/2"
	}
	perCallKB := (rss - idle) * 1024 / float64(held)
	fmt.Printf("  model over %s: %d jobs submitted in %s; %d model calls in flight at once on one chat worker\n", proto, n, submitted.Round(100*time.Millisecond), held)
	fmt.Printf("  chat worker RSS: %.0f MB idle, %.0f MB holding them (%.1f KB per call in flight)\n", idle, rss, perCallKB)
	if perCallKB > 0 {
		fmt.Printf("  model calls in flight per GB: %.0f over the idle worker, %.0f of its whole RSS\n", 1024*1024/perCallKB, float64(held)*1024/rss)
	}
	fmt.Printf("  of which: %.0f goroutines (%.1f a call), stacks %.0f MB, heap in use %.0f MB\n",
		rt["go_goroutines"], rt["go_goroutines"]/float64(held), rt["go_memstats_stack_inuse_bytes"]/1e6, rt["go_memstats_heap_inuse_bytes"]/1e6)
	return nil
}

// inflightOver picks the provider protocols -inflight measures.
var inflightOver = flag.String("inflight-over", "both", "with -inflight: https (HTTP/2, many calls on few connections), http (plain HTTP/1.1, one connection a call) or both")

// heapDir is where -inflight saves the chat worker's heap profiles (empty: none).
var heapDir = flag.String("heap-profiles", "", "with -inflight, save the chat worker's heap and goroutine profiles while it holds the jobs into this directory")

// saveProfile saves one of a process's profiles (FLEET_PPROF) to name.
func saveProfile(addr, profile, name string) error {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + profile)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s profile: %s", profile, resp.Status)
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runtimeStats reads the Go runtime's gauges from a process's /metrics.
func runtimeStats(addr string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		switch name {
		case "go_goroutines", "go_memstats_stack_inuse_bytes", "go_memstats_heap_inuse_bytes":
			out[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	return out
}

// rssMB reads a process's resident set size.
func rssMB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
