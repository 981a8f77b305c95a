// Command fleetbench measures the fleet end to end against the zero-latency
// simulator: each job goes ingress → JOBS → chat worker → model → SEARCH → search
// worker → engine → CHAT → chat worker → model → answer, over real HTTP, a real NATS
// JetStream server (embedded, file storage unless -memory) and the real Redis at
// REDIS_URL. It reports the throughput of a closed loop of clients, the latency at a
// fixed offered rate, and where the time goes (handler time per step, from the
// fleet's own metrics).
//
// Next to each throughput figure it measures the floor (benchfleet.Floor: -floor-hops
// JetStream work-queue hops with the fleet's stream settings and -floor-round-trips
// Redis round trips a hop, no other work) at the same client count, and prints the
// fleet's rate as a share of it. It counts Redis commands per job: INFO commandstats
// around the throughput phase (Lua-internal commands counted; every client of that
// Redis shows, so run it on a Redis nothing else uses) and a hook on the fleet's own
// client (commands sent, round trips), and then for -single one-search jobs measured
// alone. Beside those it prints the CPU time per job of this process (getrusage) and
// of Redis (INFO cpu), for the fleet and for the floor: on a CPU-bound machine their
// ratio is what bounds the fleet's share of the floor. -cpuprofile labels goroutines
// with part=fleet|nats|simulator|client (benchfleet.Labeled), so that
// `go tool pprof -tags` splits the one process.
//
// It then measures time to first token with streaming on: the same streaming
// question sent, one at a time, to the simulator directly and through the fleet
// (ingress → JOBS → chat worker → streamed model call → fleet.stream.v1.<job> →
// ingress → client); the difference is what the fleet adds to a model's own TTFT.
//
//	go run ./cmd/fleetbench -concurrency 16,64 -duration 10s -warmup 2s   (what `make bench-e2e` runs)
//	go run ./cmd/fleetbench -rate 500 -duration 20s -cpuprofile cpu.out -memprofile mem.out
//	go run ./cmd/fleetbench -concurrency 16 -rounds 3 -rate 0 -ttft 0   (the fleet against its floor only)
//	go run ./cmd/fleetbench -concurrency= -rate 0 -ttft 0 -single 10   (Redis commands of one job only)
//	go run ./cmd/fleetbench -concurrency= -rate 0 -ttft 500 -single 0  (time to first token only)
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/internal/testkit/benchfleet"
	"github.com/searchfleet/searchfleet/internal/testkit/peerbench"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/metrics"
)

func main() { cli.Main(run) }

func run(ctx context.Context) error {
	duration := flag.Duration("duration", 15*time.Second, "measurement time of each phase")
	warmup := flag.Duration("warmup", 3*time.Second, "warm-up before each phase")
	conc := flag.String("concurrency", "64,192", "closed-loop client counts to measure throughput with")
	rounds := flag.Int("rounds", 1, "times the fleet and the floor are measured, alternately, at each client count")
	rate := flag.Int("rate", 500, "offered jobs/s of the fixed-rate latency phase (0: skip)")
	engine := flag.String("engine", "brave", "engine the model searches with")
	memory := flag.Bool("memory", false, "keep the streams in memory instead of on disk")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured phases")
	memprofile := flag.String("memprofile", "", "write a heap profile at the end (go tool pprof -sample_index=alloc_space: what the run allocated, by call stack)")
	ttft := flag.Int("ttft", 300, "streaming requests of the time-to-first-token phase, each sent to the simulator and through the fleet (0: skip)")
	floor := flag.Bool("floor", true, "measure the floor (JetStream hops and Redis round trips, no work) at each client count, next to the fleet")
	floorHops := flag.Int("floor-hops", 5, "work-queue hops of a floor job")
	floorRT := flag.Int("floor-round-trips", 2, "Redis round trips of each floor hop")
	floorConc := flag.Int("floor-concurrency", 64, "messages each floor hop handles at once")
	single := flag.Int("single", 5, "one-search jobs measured alone for their Redis commands (0: skip)")
	settle := flag.Duration("settle", 300*time.Millisecond, "how long the fleet's Redis client must be quiet before and after a job measured alone")
	flag.Parse()

	f, err := benchfleet.Start(ctx, benchfleet.Options{Memory: *memory})
	if err != nil {
		return err
	}
	defer f.Stop()
	m := f.Metrics
	fmt.Printf("fleetbench: all roles in one process with production settings, embedded NATS JetStream (%s storage), Redis %s, zero-latency simulator, engine %s\n",
		f.Storage, redact.URL(testenv.RedisURL()), *engine)
	fmt.Printf("machine: %s; load average %s at start\n", benchfleet.Machine(), benchfleet.LoadAvg())
	defer func() { fmt.Printf("\nload average %s at the end\n", benchfleet.LoadAvg()) }()

	var fl *benchfleet.Floor
	if *floor {
		fl, err = benchfleet.StartFloor(ctx, benchfleet.FloorOptions{Hops: *floorHops, RoundTrips: *floorRT, Concurrency: *floorConc, Memory: *memory})
		if err != nil {
			return err
		}
		defer fl.Stop()
		o := fl.Options
		fmt.Printf("floor: %d JetStream work-queue hops a job (%s storage, the fleet's stream and consumer settings, its own embedded server), %d Redis round trips a hop (EVALSHA of HSET+PEXPIRE: %d commands), %d-byte messages, %d in flight a hop\n",
			o.Hops, fl.Storage, o.RoundTrips, benchfleet.FloorCommandsPerRoundTrip*o.RoundTrips, o.PayloadBytes, o.Concurrency)
	}
	fmt.Println()

	client := &http.Client{Transport: fleet.Transport(), Timeout: time.Minute}
	api := &benchfleet.Client{Base: f.URL, HTTP: client}
	var seq atomic.Int64
	one := func() (time.Duration, error) {
		return api.Ask(ctx, fmt.Sprintf("Search the web: what is new today, item %d? sim:engine=%s", seq.Add(1), *engine))
	}
	meter := benchfleet.RedisMeter{Stats: f.Stats, Counter: f.Counter}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	if *memprofile != "" {
		defer writeHeapProfile(*memprofile)
	}

	if bg, err := meter.Idle(ctx, time.Second); err == nil {
		fmt.Printf("Redis while the fleet idles (1 s): %d commands by the server's count, %d sent by the fleet's client: the rest is other clients of this Redis and the scripts' inner commands\n\n",
			bg.Server.Total(), bg.Client.Commands)
	}

	type costRow struct {
		clients int
		jobs    int
		cost    benchfleet.RedisCost
		fleet   cpuCost
		floor   cpuCost // zero without -floor
		// allocs and allocBytes are this process's heap allocations over the fleet's
		// phase (the simulator's and the clients' included).
		allocs, allocBytes uint64
	}
	var costs []costRow
	fmt.Println("Throughput (closed loop: each client sends its next job when the last is answered; the floor measured right after the fleet at the same client count)")
	fmt.Printf("  %-8s %10s %9s %9s %9s %7s %12s %9s %9s %12s\n", "clients", "jobs/s", "p50", "p99", "max", "errors", "floor jobs/s", "p50", "p99", "fleet/floor")
	counts := benchfleet.Ints(*conc)
	for i, c := range counts {
		for range max(*rounds, 1) {
			benchfleet.ClosedLoop(ctx, one, c, *warmup, 0)
			before := snapshot(m)
			stopMeter, err := meter.Start(ctx)
			if err != nil {
				return err
			}
			cpu0, rcpu0 := benchfleet.ProcessCPU(), redisCPU(ctx, f.Stats)
			objs0, bytes0 := benchfleet.Allocs()
			res := benchfleet.ClosedLoop(ctx, one, c, *duration, 0)
			cpu, rcpu := benchfleet.ProcessCPU()-cpu0, redisCPU(ctx, f.Stats)-rcpu0
			objs, bytes := benchfleet.Allocs()
			cost, err := stopMeter(ctx)
			if err != nil {
				return err
			}
			after := snapshot(m)
			if res.FirstErr != nil {
				fmt.Fprintln(os.Stderr, "error:", res.FirstErr)
			}
			costs = append(costs, costRow{clients: c, jobs: len(res.Latencies), cost: cost, fleet: cpuCost{len(res.Latencies), cpu, rcpu}, allocs: objs - objs0, allocBytes: bytes - bytes0})
			line := fmt.Sprintf("  %-8d %10.0f %9s %9s %9s %7d", c, res.Rate(), pct(res.Latencies, 50), pct(res.Latencies, 99), pct(res.Latencies, 100), res.Errors)
			if fl != nil {
				job := func() (time.Duration, error) { return fl.Job(ctx) }
				benchfleet.ClosedLoop(ctx, job, c, *warmup, 0)
				fcpu0, frcpu0 := benchfleet.ProcessCPU(), redisCPU(ctx, f.Stats)
				fr := benchfleet.ClosedLoop(ctx, job, c, *duration, 0)
				costs[len(costs)-1].floor = cpuCost{len(fr.Latencies), benchfleet.ProcessCPU() - fcpu0, redisCPU(ctx, f.Stats) - frcpu0}
				if fr.FirstErr != nil {
					fmt.Fprintln(os.Stderr, "floor error:", fr.FirstErr)
				}
				ratio := "-"
				if fr.Rate() > 0 {
					ratio = fmt.Sprintf("%.0f%%", 100*res.Rate()/fr.Rate())
				}
				line += fmt.Sprintf(" %12.0f %9s %9s %12s", fr.Rate(), pct(fr.Latencies, 50), pct(fr.Latencies, 99), ratio)
			}
			fmt.Println(line)
			if i == len(counts)-1 {
				defer breakdown(before, after, len(res.Latencies))
			}
		}
	}
	if len(costs) > 0 {
		fmt.Println("\nRedis per fleet job in the throughput phase (server: INFO commandstats deltas, Lua-internal commands counted, every client of this Redis included; client: the fleet's own Redis client, a script one command, a pipeline one round trip)")
		fmt.Printf("  %-8s %8s %14s %12s %16s %16s  %s\n", "clients", "jobs", "commands/job", "scripts/job", "client cmds/job", "round trips/job", "server commands per job, most first")
		for _, r := range costs {
			n := float64(max(r.jobs, 1))
			fmt.Printf("  %-8d %8d %14.1f %12.1f %16.1f %16.1f  %s\n", r.clients, r.jobs, float64(r.cost.Server.Total())/n, float64(r.cost.Server.Scripts())/n,
				float64(r.cost.Client.Commands)/n, float64(r.cost.Client.RoundTrips)/n, benchfleet.FormatTop(r.cost.Server, 8, n))
		}
		fmt.Println("\nCPU per job in the throughput phase (this process from getrusage: for the fleet, its roles, its NATS server, the simulator and the clients, which -cpuprofile splits by the label part; for the floor, its hops, its NATS server and the clients; Redis from INFO cpu)")
		fmt.Printf("  %-8s %8s %16s %14s %12s %12s %10s %16s %14s %12s\n", "clients", "jobs", "fleet process ms", "fleet Redis ms", "allocs/job", "KB alloc/job", "floor jobs", "floor process ms", "floor Redis ms", "fleet/floor")
		for _, r := range costs {
			ratio := "-"
			if r.floor.perJob() > 0 {
				ratio = fmt.Sprintf("%.1f×", r.fleet.perJob()/r.floor.perJob())
			}
			n := float64(max(r.fleet.jobs, 1))
			fmt.Printf("  %-8d %8d %16.3f %14.3f %12.0f %12.0f %10d %16.3f %14.3f %12s\n", r.clients, r.fleet.jobs, r.fleet.processMs(), r.fleet.redisMs(),
				float64(r.allocs)/n, float64(r.allocBytes)/1024/n, r.floor.jobs, r.floor.processMs(), r.floor.redisMs(), ratio)
		}
	}
	if *single > 0 {
		alone(ctx, meter, *single, *settle, func() error { _, err := one(); return err })
	}
	if *rate > 0 {
		fmt.Printf("\nLatency at a fixed offered rate of %d jobs/s (open loop; every latency is pipeline overhead: the simulator answers at once)\n", *rate)
		// More than two seconds' worth unanswered: the fleet cannot carry the rate.
		benchfleet.OpenLoop(ctx, one, *rate, *warmup, nil, 2**rate)
		r := benchfleet.OpenLoop(ctx, one, *rate, *duration, nil, 2**rate)
		lat := r.Latencies
		fmt.Printf("  achieved %.0f jobs/s, p50 %s, p90 %s, p99 %s, p99.9 %s, max %s, errors %d\n",
			r.Rate(), pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 99.9), pct(lat, 100), r.Errors)
		if r.Behind {
			fmt.Printf("  NOT SUSTAINED: more than 2 s of offered jobs were unanswered, so offering stopped after %d jobs (the figures above are of those)\n", len(lat)+r.Errors)
		}
	}
	if *ttft > 0 {
		firstToken(ctx, client, f, *ttft)
	}
	return nil
}

// writeHeapProfile writes the heap profile (allocations since the start included) to
// name.
func writeHeapProfile(name string) {
	f, err := os.Create(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memprofile:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "memprofile:", err)
	}
}

// alone measures n one-search jobs one at a time, each with the fleet quiet before
// and after, and prints each one's Redis commands and the median.
func alone(ctx context.Context, meter benchfleet.RedisMeter, n int, settle time.Duration, job func() error) {
	fmt.Printf("\nRedis for one one-search job measured alone (%d jobs one at a time; each read from just before it is sent until the fleet's Redis client has been quiet for %s after the answer)\n", n, settle)
	fmt.Printf("  %-5s %9s %9s %13s %12s   %s\n", "job", "commands", "scripts", "client cmds", "round trips", "background in an idle window as long (server commands / client commands)")
	var cmds, rts []float64
	var last benchfleet.JobCost
	for i := range n {
		c, err := benchfleet.MeasureAlone(ctx, meter, settle, job)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			continue
		}
		last = c
		cmds, rts = append(cmds, float64(c.Job.Server.Total())), append(rts, float64(c.Job.Client.RoundTrips))
		fmt.Printf("  %-5d %9d %9d %13d %12d   %d / %d\n", i+1, c.Job.Server.Total(), c.Job.Server.Scripts(), c.Job.Client.Commands, c.Job.Client.RoundTrips,
			c.Background.Server.Total(), c.Background.Client.Commands)
	}
	if len(cmds) == 0 {
		return
	}
	fmt.Printf("  median: %.0f commands, %.0f round trips a one-search job\n", median(cmds), median(rts))
	fmt.Printf("  the last job's commands: %s\n", benchfleet.FormatTop(last.Job.Server, 40, 1))
	fmt.Printf("  the last job's client calls: %s\n", benchfleet.FormatTop(benchfleet.CommandStats(last.Job.Client.ByName), 40, 1))
}

// cpuCost is the CPU time of a measured phase: this process's and the Redis server's.
type cpuCost struct {
	jobs           int
	process, redis time.Duration
}

func (c cpuCost) processMs() float64 { return c.per(c.process) }
func (c cpuCost) redisMs() float64   { return c.per(c.redis) }

// perJob is both together, in ms a job.
func (c cpuCost) perJob() float64 { return c.per(c.process + c.redis) }

func (c cpuCost) per(d time.Duration) float64 {
	if c.jobs == 0 {
		return 0
	}
	return float64(d) / float64(time.Millisecond) / float64(c.jobs)
}

// redisCPU is the Redis server's CPU time so far, 0 if INFO cpu cannot be read.
func redisCPU(ctx context.Context, rdb redis.UniversalClient) time.Duration {
	d, _ := peerbench.RedisCPU(ctx, rdb)
	return d
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// firstToken measures time to first token, streaming on, one request at a time: a
// plain question (no search: the first token comes from the first model call) straight
// to the simulator, then the same through the fleet.
func firstToken(ctx context.Context, hc *http.Client, f *benchfleet.Fleet, n int) {
	fmt.Printf("\nTime to first token, streaming on (%d sequential requests each; a question the model answers without searching)\n", n)
	measure := func(base, model string) ([]time.Duration, int) {
		var lat []time.Duration
		errs := 0
		for i := range n + n/10 { // the first tenth warms up
			d, err := benchfleet.FirstToken(ctx, hc, base, model, fmt.Sprintf("Tell me a story about item %d sim:nosearch", i))
			switch {
			case err != nil:
				if errs++; errs < 3 {
					fmt.Fprintln(os.Stderr, "error:", err)
				}
			case i >= n/10:
				lat = append(lat, d)
			}
		}
		return lat, errs
	}
	sim, serrs := measure(f.SimURL, "sim-scripted")
	fl, ferrs := measure(f.URL, demo.Model)
	fmt.Printf("  %-34s %9s %9s %9s %7s\n", "", "p50", "p90", "p99", "errors")
	fmt.Printf("  %-34s %9s %9s %9s %7d\n", "simulator directly", pct(sim, 50), pct(sim, 90), pct(sim, 99), serrs)
	fmt.Printf("  %-34s %9s %9s %9s %7d\n", "through the fleet", pct(fl, 50), pct(fl, 90), pct(fl, 99), ferrs)
	if len(sim) > 0 && len(fl) > 0 {
		fmt.Printf("  the fleet adds %s at p50\n", (benchfleet.Pct(fl, 50) - benchfleet.Pct(sim, 50)).Round(10*time.Microsecond))
	}
}

func pct(l []time.Duration, p float64) string {
	if len(l) == 0 {
		return "-"
	}
	return benchfleet.Pct(l, p).Round(10 * time.Microsecond).String()
}

// snapshot reads the histogram sums and counts of the fleet's metrics.
func snapshot(m *metrics.Metrics) map[string][2]float64 {
	out := map[string][2]float64{}
	families, _ := m.Registry.Gather()
	for _, f := range families {
		name := f.GetName()
		if name != "fleet_step_seconds" && name != "fleet_model_call_seconds" && name != "fleet_search_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			key := name + "{" + labels(mt.GetLabel()) + "}"
			h := mt.GetHistogram()
			out[key] = [2]float64{h.GetSampleSum(), float64(h.GetSampleCount())}
		}
	}
	return out
}

func labels(ls []*dto.LabelPair) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

// breakdown prints the mean time per job of each step, from the metrics' deltas.
func breakdown(before, after map[string][2]float64, jobs int) {
	fmt.Printf("\nWhere the time goes at the highest client count (mean per occurrence, from the fleet's histograms)\n")
	for _, k := range slices.Sorted(maps.Keys(after)) {
		d := [2]float64{after[k][0] - before[k][0], after[k][1] - before[k][1]}
		if d[1] == 0 {
			continue
		}
		fmt.Printf("  %-58s %5.2f per job  mean %8s\n", k, d[1]/float64(max(jobs, 1)), time.Duration(d[0]/d[1]*float64(time.Second)).Round(time.Microsecond))
	}
}
