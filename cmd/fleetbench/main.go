// Command fleetbench measures the fleet end to end against the zero-latency
// simulator: each job goes ingress → JOBS → chat worker → model → SEARCH → search
// worker → engine → CHAT → chat worker → model → answer, over real HTTP, a real NATS
// JetStream server (embedded, file storage unless -memory) and the real Redis at
// REDIS_URL. It reports the throughput of a closed loop of clients, the latency at a
// fixed offered rate, and where the time goes (handler time per step, from the
// fleet's own metrics).
//
// It then measures time to first token with streaming on: the same streaming
// question sent, one at a time, to the simulator directly and through the fleet
// (ingress → JOBS → chat worker → streamed model call → fleet.stream.v1.<job> →
// ingress → client); the difference is what the fleet adds to a model's own TTFT.
//
//	go run ./cmd/fleetbench                       (what `make bench-e2e` runs)
//	go run ./cmd/fleetbench -rate 500 -duration 20s -cpuprofile cpu.out
//	go run ./cmd/fleetbench -concurrency= -rate 0 -ttft 500   (time to first token only)
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/searchfleet/searchfleet/internal/redact"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/searchfleet/searchfleet/internal/benchfleet"
	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testenv"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/metrics"
)

func main() { cli.Main(run) }

func run(ctx context.Context) error {
	duration := flag.Duration("duration", 15*time.Second, "measurement time of each phase")
	warmup := flag.Duration("warmup", 3*time.Second, "warm-up before each phase")
	conc := flag.String("concurrency", "64,192", "closed-loop client counts to measure throughput with")
	rate := flag.Int("rate", 500, "offered jobs/s of the fixed-rate latency phase (0: skip)")
	engine := flag.String("engine", "brave", "engine the model searches with")
	memory := flag.Bool("memory", false, "keep the streams in memory instead of on disk")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured phases")
	ttft := flag.Int("ttft", 300, "streaming requests of the time-to-first-token phase, each sent to the simulator and through the fleet (0: skip)")
	flag.Parse()

	f, err := benchfleet.Start(ctx, benchfleet.Options{Memory: *memory})
	if err != nil {
		return err
	}
	defer f.Stop()
	m := f.Metrics
	fmt.Printf("fleetbench: all roles in one process with production settings, embedded NATS JetStream (%s storage), Redis %s, zero-latency simulator, engine %s\n",
		f.Storage, redact.URL(testenv.RedisURL()), *engine)
	fmt.Printf("machine: %s\n\n", benchfleet.Machine())

	client := &http.Client{Transport: fleet.Transport(), Timeout: time.Minute}
	var seq atomic.Int64
	one := func() (time.Duration, error) {
		return benchfleet.Ask(ctx, client, f.URL, fmt.Sprintf("Search the web: what is new today, item %d? sim:engine=%s", seq.Add(1), *engine))
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	fmt.Println("Throughput (closed loop: each client sends its next job when the last is answered)")
	fmt.Printf("  %-8s %10s %9s %9s %9s %7s\n", "clients", "jobs/s", "p50", "p99", "max", "errors")
	for _, c := range parseInts(*conc) {
		closedLoop(ctx, one, c, *warmup)
		before := snapshot(m)
		lat, errs, elapsed := closedLoop(ctx, one, c, *duration)
		after := snapshot(m)
		fmt.Printf("  %-8d %10.0f %9s %9s %9s %7d\n", c, float64(len(lat))/elapsed.Seconds(), pct(lat, 50), pct(lat, 99), pct(lat, 100), errs)
		if c == parseInts(*conc)[len(parseInts(*conc))-1] {
			defer breakdown(before, after, len(lat))
		}
	}
	if *rate > 0 {
		fmt.Printf("\nLatency at a fixed offered rate of %d jobs/s (open loop; every latency is pipeline overhead: the simulator answers at once)\n", *rate)
		openLoop(ctx, one, *rate, *warmup)
		lat, errs, elapsed := openLoop(ctx, one, *rate, *duration)
		fmt.Printf("  achieved %.0f jobs/s, p50 %s, p90 %s, p99 %s, p99.9 %s, max %s, errors %d\n",
			float64(len(lat))/elapsed.Seconds(), pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 99.9), pct(lat, 100), errs)
	}
	if *ttft > 0 {
		firstToken(ctx, client, f, *ttft)
	}
	return nil
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

// closedLoop runs c clients for d.
func closedLoop(ctx context.Context, one func() (time.Duration, error), c int, d time.Duration) ([]time.Duration, int, time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	end := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(end) && ctx.Err() == nil {
				l, err := one()
				if err != nil {
					if errs.Add(1) < 3 {
						fmt.Fprintln(os.Stderr, "error:", err)
					}
					continue
				}
				mine = append(mine, l)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, int(errs.Load()), time.Since(start)
}

// openLoop offers rate jobs/s for d, whether or not earlier ones have been answered.
func openLoop(ctx context.Context, one func() (time.Duration, error), rate int, d time.Duration) ([]time.Duration, int, time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	next := start
	for time.Since(start) < d && ctx.Err() == nil {
		next = next.Add(interval)
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := one()
			if err != nil {
				errs.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, l)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, int(errs.Load()), time.Since(start)
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
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d := [2]float64{after[k][0] - before[k][0], after[k][1] - before[k][1]}
		if d[1] == 0 {
			continue
		}
		fmt.Printf("  %-58s %5.2f per job  mean %8s\n", k, d[1]/float64(max(jobs, 1)), time.Duration(d[0]/d[1]*float64(time.Second)).Round(time.Microsecond))
	}
}

func parseInts(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		var n int
		fmt.Sscan(strings.TrimSpace(p), &n)
		if n > 0 {
			out = append(out, n)
		}
	}
	return out
}
