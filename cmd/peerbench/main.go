// Command peerbench sends the same no-search chat completion to the provider simulator
// alone, through the fleet, and through the Portkey AI gateway (an in-process proxy:
// @portkey-ai/gateway from npm, pinned in bench/peer and installed by
// scripts/install-portkey.sh), all on this machine and over loopback only, and reports
// for each at every client count: requests/s, p50 and p99 latency and their overhead
// over the simulator alone, and CPU per request (the fleet's process, with its embedded
// NATS server, plus the Redis server, against Portkey's node process; from
// /proc/<pid>/stat and INFO cpu). Rounds alternate which gateway goes first.
//
// The fleet runs as `make run` does (cmd/fleet: every role in one process, an embedded
// NATS JetStream server with file storage) against the simulator, a separate process
// (cmd/simulator), and the Redis at REDIS_URL under a key prefix of its own, deleted
// after. Portkey reaches the same simulator as an OpenAI provider at a custom host
// (x-portkey-provider: openai, x-portkey-custom-host).
//
//	make bench-peer
//	go run ./cmd/peerbench -portkey-dir "$(scripts/install-portkey.sh)" -rounds 3
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/internal/testkit/benchfleet"
	"github.com/searchfleet/searchfleet/internal/testkit/chaos"
	"github.com/searchfleet/searchfleet/internal/testkit/peerbench"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

func main() { cli.Main(run) }

// portkeyVersion is the version bench/peer pins.
const portkeyVersion = "1.15.2"

type options struct {
	rounds   int
	conc     []int
	requests []int
	maxTime  time.Duration
	settle   time.Duration
}

func run(ctx context.Context) error {
	rounds := flag.Int("rounds", 3, "rounds; each measures the simulator, then the fleet and Portkey in alternating order, at every client count")
	conc := flag.String("concurrency", "1,32", "closed-loop client counts")
	requests := flag.String("requests", "1500,6000", "requests measured per phase at each client count (after a tenth as many to warm up)")
	maxTime := flag.Duration("max-time", 10*time.Second, "time limit of each measured phase")
	portkeyDir := flag.String("portkey-dir", os.Getenv("PORTKEY_DIR"), "where scripts/install-portkey.sh installed the gateway (default: its default directory)")
	binDir := flag.String("bin", "", "directory holding the fleet and simulator binaries (default: build them)")
	flag.Parse()
	o := options{rounds: max(*rounds, 1), conc: benchfleet.Ints(*conc), requests: benchfleet.Ints(*requests), maxTime: *maxTime, settle: 200 * time.Millisecond}
	if len(o.conc) == 0 || len(o.requests) != len(o.conc) {
		return fmt.Errorf("-requests needs one count for each of -concurrency")
	}
	if *portkeyDir == "" {
		*portkeyDir = defaultPortkeyDir()
	}
	gateway := filepath.Join(*portkeyDir, "node_modules", "@portkey-ai", "gateway")
	if b, err := os.ReadFile(filepath.Join(gateway, "package.json")); err != nil || !strings.Contains(string(b), `"version": "`+portkeyVersion+`"`) {
		return fmt.Errorf("the Portkey gateway %s is not installed in %s: run scripts/install-portkey.sh", portkeyVersion, *portkeyDir)
	}

	tmp, err := os.MkdirTemp("", "peerbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	procs := &processes{dir: tmp}
	defer procs.stop()

	if *binDir == "" {
		*binDir = tmp
		fmt.Fprintln(os.Stderr, "peerbench: building cmd/fleet and cmd/simulator")
		build := exec.CommandContext(ctx, cmp.Or(os.Getenv("GO"), "go"), "build", "-o", tmp+string(os.PathSeparator), "./cmd/fleet", "./cmd/simulator")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the binaries: %w", err)
		}
	}

	// The simulator, and the fleet's configuration for it.
	simAddr, err := chaos.FreeAddr()
	if err != nil {
		return err
	}
	simBin := filepath.Join(*binDir, "simulator")
	cfgJSON, err := exec.CommandContext(ctx, simBin, "-addr", simAddr, "-print-config").Output()
	if err != nil {
		return fmt.Errorf("simulator -print-config: %w", err)
	}
	cfg := filepath.Join(tmp, "fleet.json")
	if err := os.WriteFile(cfg, cfgJSON, 0o644); err != nil {
		return err
	}
	if _, err := procs.start("simulator", nil, simBin, "-addr", simAddr); err != nil {
		return err
	}
	sim := peerbench.Target{Name: "simulator", BaseURL: "http://" + simAddr, Model: "sim-scripted"}

	// The fleet, as `make run` runs it, on the simulator and REDIS_URL.
	rdb, err := state.Dial(ctx, testenv.RedisURL(), 10*time.Second)
	if err != nil {
		return err
	}
	defer rdb.Close()
	prefix := fmt.Sprintf("sfpeer:%d", time.Now().UnixNano())
	defer benchfleet.DeleteKeys(rdb, prefix)
	fleetAddr, err := chaos.FreeAddr()
	if err != nil {
		return err
	}
	fenv := append([]string{"REDIS_URL=" + testenv.RedisURL(), "FLEET_REDIS_PREFIX=" + prefix, "FLEET_CONFIG=" + cfg,
		"FLEET_DATA_DIR=" + filepath.Join(tmp, "data"), "FLEET_HTTP_ADDR=" + fleetAddr, "FLEET_LOG_LEVEL=error", demo.KeyEnv + "=sim-key"},
		config.UnlimitedTenantEnv()...) // the fleet's capacity is measured, not its per-tenant limits
	for _, kv := range os.Environ() { // settings to try (FLEET_*) and the Go runtime's reach the fleet
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "FLEET_") || k == "GOGC" || k == "GOMEMLIMIT" || k == "GODEBUG" {
			fenv = append(fenv, kv)
		}
	}
	fleetPID, err := procs.start("fleet", fenv, filepath.Join(*binDir, "fleet"))
	if err != nil {
		return err
	}
	fl := peerbench.Target{Name: "fleet", BaseURL: "http://" + fleetAddr, Model: demo.Model}

	// Portkey, pointed at the simulator as an OpenAI provider at a custom host.
	pkAddr, err := chaos.FreeAddr()
	if err != nil {
		return err
	}
	_, pkPort, _ := net.SplitHostPort(pkAddr)
	pkPID, err := procs.start("portkey", []string{"NODE_ENV=production"}, cmp.Or(os.Getenv("NODE"), "node"), filepath.Join(gateway, "build", "start-server.js"), "--port="+pkPort)
	if err != nil {
		return err
	}
	pk := peerbench.Target{Name: "portkey", BaseURL: "http://" + pkAddr, Model: "sim-scripted", Header: http.Header{
		"X-Portkey-Provider":    {"openai"},
		"X-Portkey-Custom-Host": {sim.BaseURL + "/v1"},
		"Authorization":         {"Bearer sim-key"},
	}}

	hc := peerbench.Client(slices.Max(o.conc))
	var seq atomic.Int64
	for _, t := range []peerbench.Target{sim, fl, pk} {
		if err := ready(ctx, hc, t, procs, 60*time.Second); err != nil {
			return err
		}
	}
	redisPID := peerbench.RedisPID(ctx, rdb)
	fmt.Printf("peerbench: the same no-search chat completion (one model call, answered at once by the simulator) to the simulator alone, through the fleet and through the Portkey gateway %s\n", portkeyVersion)
	fmt.Printf("  fleet: cmd/fleet (pid %d: every role and the embedded NATS JetStream server, file storage), Redis %s (pid %d)\n", fleetPID, redact.URL(testenv.RedisURL()), redisPID)
	fmt.Printf("  portkey: node %s --port=%s (pid %d), x-portkey-provider: openai, x-portkey-custom-host: %s/v1\n", filepath.Join(gateway, "build", "start-server.js"), pkPort, pkPID, sim.BaseURL)
	fmt.Printf("  simulator: cmd/simulator (its CPU is counted for no one); load generator: this process, closed loop, keep-alive\n")
	fmt.Printf("machine: %s; load average %s at start\n", benchfleet.Machine(), benchfleet.LoadAvg())
	fmt.Printf("CPU per request: the fleet's is its process's plus Redis's (INFO cpu: every client of that Redis counts); Portkey's is its node process's\n\n")

	// Warm every path up (JIT, connection pools, the fleet's streams).
	for _, t := range []peerbench.Target{sim, fl, pk} {
		res := benchfleet.ClosedLoop(ctx, func() (time.Duration, error) { return peerbench.Ask(ctx, hc, t, seq.Add(1)) }, 8, 20*time.Second, 400)
		if res.Errors > 0 {
			return fmt.Errorf("warming %s up: %v", t.Name, res.FirstErr)
		}
	}

	cpu := map[string]func() (time.Duration, time.Duration, error){
		"simulator": func() (time.Duration, time.Duration, error) { return 0, 0, nil },
		"fleet": func() (time.Duration, time.Duration, error) {
			p, err := peerbench.ProcCPU(fleetPID)
			if err != nil {
				return 0, 0, err
			}
			r, err := peerbench.RedisCPU(ctx, rdb)
			return p, r, err
		},
		"portkey": func() (time.Duration, time.Duration, error) {
			p, err := peerbench.ProcCPU(pkPID)
			return p, 0, err
		},
	}
	// What each uses doing nothing, for reading the CPU figures of slow phases.
	idle := 2 * time.Second
	f0, r0, err := cpu["fleet"]()
	if err != nil {
		return err
	}
	k0, _, err := cpu["portkey"]()
	if err != nil {
		return err
	}
	time.Sleep(idle)
	f1, r1, _ := cpu["fleet"]()
	k1, _, _ := cpu["portkey"]()
	fmt.Printf("CPU used idle over %s: fleet %s, Redis %s, Portkey %s\n\n", idle, f1-f0, r1-r0, k1-k0)

	var results []phase
	fmt.Printf("  %-5s %-7s %-10s %8s %9s %9s %9s %9s %9s %11s %11s\n", "round", "clients", "target", "requests", "req/s", "p50", "p99", "+p50", "+p99", "CPU/req", "of it Redis")
	for r := 1; r <= o.rounds; r++ {
		for i, c := range o.conc {
			order := []peerbench.Target{sim, fl, pk}
			if r%2 == 0 {
				order = []peerbench.Target{sim, pk, fl}
			}
			var base phase0
			for _, t := range order {
				p, err := measure(ctx, hc, t, c, o.requests[i], o, &seq, cpu[t.Name])
				if err != nil {
					return err
				}
				p.round = r
				if t.Name == "simulator" {
					base = p.base
				}
				p.base = base
				results = append(results, p)
				p.print()
			}
		}
	}
	summary(results, o)
	fmt.Printf("\nload average %s at the end\n", benchfleet.LoadAvg())
	return nil
}

// phase is one target measured at one client count in one round.
type phase struct {
	round, clients int
	target         string
	res            benchfleet.LoadResult
	cpu, redis     time.Duration // CPU used while measured; redis is part of cpu
	base           phase0
}

// phase0 is the simulator's phase of the same round and client count.
type phase0 = struct{ p50, p99 time.Duration }

func (p phase) n() int                   { return len(p.res.Latencies) }
func (p phase) p50() time.Duration       { return benchfleet.Pct(p.res.Latencies, 50) }
func (p phase) p99() time.Duration       { return benchfleet.Pct(p.res.Latencies, 99) }
func (p phase) over50() time.Duration    { return p.p50() - p.base.p50 }
func (p phase) over99() time.Duration    { return p.p99() - p.base.p99 }
func (p phase) cpuPerReq() time.Duration { return p.cpu / time.Duration(max(p.n(), 1)) }
func (p phase) redisPerReq() time.Duration {
	return p.redis / time.Duration(max(p.n(), 1))
}

func (p phase) print() {
	cpu, redis := "-", "-"
	if p.target != "simulator" {
		cpu = ms(p.cpuPerReq())
	}
	if p.target == "fleet" {
		redis = ms(p.redisPerReq())
	}
	over50, over99 := "", ""
	if p.target != "simulator" {
		over50, over99 = signed(p.over50()), signed(p.over99())
	}
	fmt.Printf("  %-5d %-7d %-10s %8d %9.0f %9s %9s %9s %9s %11s %11s\n", p.round, p.clients, p.target, p.n(), p.res.Rate(),
		ms(p.p50()), ms(p.p99()), over50, over99, cpu, redis)
}

// measure warms t up with a tenth of n requests at c clients, then measures n (or
// what o.maxTime allows) and the CPU its processes used meanwhile, read after the
// last answer and a short settle (work a gateway does after answering counts).
func measure(ctx context.Context, hc *http.Client, t peerbench.Target, c, n int, o options, seq *atomic.Int64, cpu func() (time.Duration, time.Duration, error)) (phase, error) {
	one := func() (time.Duration, error) { return peerbench.Ask(ctx, hc, t, seq.Add(1)) }
	benchfleet.ClosedLoop(ctx, one, c, o.maxTime, max(n/10, c))
	time.Sleep(o.settle)
	p0, r0, err := cpu()
	if err != nil {
		return phase{}, err
	}
	res := benchfleet.ClosedLoop(ctx, one, c, o.maxTime, n)
	time.Sleep(o.settle)
	p1, r1, err := cpu()
	if err != nil {
		return phase{}, err
	}
	if res.Errors > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d errors, the first: %v\n", t.Name, res.Errors, res.FirstErr)
	}
	if len(res.Latencies) == 0 {
		return phase{}, fmt.Errorf("%s at %d clients: no request succeeded: %v", t.Name, c, res.FirstErr)
	}
	p := phase{clients: c, target: t.Name, res: res, cpu: (p1 - p0) + (r1 - r0), redis: r1 - r0}
	if t.Name == "simulator" {
		p.base = phase0{p.p50(), p.p99()}
	}
	return p, nil
}

// summary prints, per client count, each gateway's figures over the rounds and the
// fleet's against Portkey's.
func summary(all []phase, o options) {
	fmt.Printf("\nSummary over %d rounds (min–max; overheads are over the simulator alone in the same round)\n", o.rounds)
	fmt.Printf("  %-7s %-8s %17s %17s %15s %17s %17s\n", "clients", "target", "+p50", "+p99", "req/s", "CPU/req", "of it Redis")
	for _, c := range o.conc {
		for _, name := range []string{"fleet", "portkey"} {
			var ps []phase
			for _, p := range all {
				if p.clients == c && p.target == name {
					ps = append(ps, p)
				}
			}
			redis := "-"
			if name == "fleet" {
				redis = rangeOf(ps, func(p phase) float64 { return msf(p.redisPerReq()) }, "%.3f", " ms")
			}
			fmt.Printf("  %-7d %-8s %17s %17s %15s %17s %17s\n", c, name,
				rangeOf(ps, func(p phase) float64 { return msf(p.over50()) }, "%.2f", " ms"),
				rangeOf(ps, func(p phase) float64 { return msf(p.over99()) }, "%.2f", " ms"),
				rangeOf(ps, func(p phase) float64 { return p.res.Rate() }, "%.0f", ""),
				rangeOf(ps, func(p phase) float64 { return msf(p.cpuPerReq()) }, "%.3f", " ms"), redis)
		}
	}
	fmt.Println("\nThe fleet against Portkey, round by round:")
	for _, c := range o.conc {
		var p50, rps, cpu []string
		for r := 1; r <= o.rounds; r++ {
			var f, p phase
			for _, x := range all {
				if x.round == r && x.clients == c {
					switch x.target {
					case "fleet":
						f = x
					case "portkey":
						p = x
					}
				}
			}
			p50 = append(p50, fmt.Sprintf("%s vs %s", signed(f.over50()), signed(p.over50())))
			rps = append(rps, fmt.Sprintf("%.2f×", f.res.Rate()/max(p.res.Rate(), 1e-9)))
			cpu = append(cpu, fmt.Sprintf("%.2f×", float64(f.cpuPerReq())/max(float64(p.cpuPerReq()), 1)))
		}
		fmt.Printf("  %d clients: p50 overhead fleet vs Portkey %s; requests/s fleet/Portkey %s; CPU per request fleet+Redis / Portkey %s\n",
			c, strings.Join(p50, ", "), strings.Join(rps, ", "), strings.Join(cpu, ", "))
	}
}

func rangeOf(ps []phase, f func(phase) float64, format, unit string) string {
	if len(ps) == 0 {
		return "-"
	}
	lo, hi := f(ps[0]), f(ps[0])
	for _, p := range ps[1:] {
		lo, hi = min(lo, f(p)), max(hi, f(p))
	}
	if fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
		return fmt.Sprintf(format, lo) + unit
	}
	return fmt.Sprintf(format+"–"+format, lo, hi) + unit
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ms(d time.Duration) string { return strconv.FormatFloat(msf(d), 'f', 2, 64) + "ms" }

func signed(d time.Duration) string { return fmt.Sprintf("%+.2fms", msf(d)) }

// ready waits until t answers a request, or a process it needs has exited.
func ready(ctx context.Context, hc *http.Client, t peerbench.Target, procs *processes, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var err error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err = peerbench.Ask(ctx, hc, t, 0); err == nil {
			return nil
		}
		for _, p := range procs.list {
			if !p.Running() {
				return fmt.Errorf("%s exited; its output is in %s", p.Name, p.LogFile)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer in %s: %v", t.Name, wait, err)
}

// processes are the processes the benchmark started.
type processes struct {
	dir  string
	list []*chaos.Proc
}

// start starts bin with env added to a minimal environment, its output to a log
// file, and returns its pid.
func (ps *processes) start(name string, env []string, bin string, args ...string) (int, error) {
	p, err := chaos.NewProc(ps.dir, name, bin, args, append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...))
	if err != nil {
		return 0, err
	}
	if err := p.Start(); err != nil {
		return 0, err
	}
	ps.list = append(ps.list, p)
	return p.Pid(), nil
}

// stop ends the processes it started, newest first: SIGTERM, then SIGKILL after 10 s.
func (ps *processes) stop() {
	for i := len(ps.list) - 1; i >= 0; i-- {
		ps.list[i].Term(10 * time.Second)
	}
}

// defaultPortkeyDir is where scripts/install-portkey.sh installs the gateway unless
// PORTKEY_DIR says otherwise.
func defaultPortkeyDir() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "searchfleet", "portkey-gateway-"+portkeyVersion)
}
