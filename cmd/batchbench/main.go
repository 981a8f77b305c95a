// Command batchbench measures whether a large batch leaves interactive requests
// alone. It runs a whole fleet in this process — ingress, chat and search workers
// wired by fleet.Run with the production defaults of every setting, an embedded NATS
// JetStream server (file storage unless -memory), the real Redis at REDIS_URL, and the
// provider simulator — and measures interactive /v1/chat/completions latency at a fixed
// low rate, first alone, then while a batch of -batch questions runs. It prints p50,
// p90, p99 and max of both phases, the batch's duration, and whether p99 during the
// batch stays within -goal times p99 without it.
//
//	go run ./cmd/batchbench
//	go run ./cmd/batchbench -model-latency 300ms -engine-latency 500ms
//	FLEET_BATCH_CONCURRENCY=4 go run ./cmd/batchbench   (settings come from the environment)
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/internal/testkit/benchfleet"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/fleet"
)

func main() { cli.Main(run) }

// options are the benchmark's flags.
type options struct {
	rate          int
	duration      time.Duration
	warmup        time.Duration
	batch         int
	runs          int
	goal          float64
	modelLatency  time.Duration
	engineLatency time.Duration
	memory        bool
}

func parseFlags() options {
	var o options
	flag.IntVar(&o.rate, "rate", 20, "interactive requests per second (open loop)")
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "length of the phase without a batch")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up before measuring")
	flag.IntVar(&o.batch, "batch", 2000, "questions in the batch")
	flag.IntVar(&o.runs, "runs", 3, "batches to run one after the other (more interactive samples during batches)")
	flag.Float64Var(&o.goal, "goal", 2, "p99 during the batch may be at most this many times p99 without it")
	flag.DurationVar(&o.modelLatency, "model-latency", 0, "simulated main-model latency per call")
	flag.DurationVar(&o.engineLatency, "engine-latency", 0, "simulated search-engine latency per search")
	flag.BoolVar(&o.memory, "memory", false, "keep the streams in memory instead of on disk")
	flag.Parse()
	return o
}

func run(ctx context.Context) error {
	o := parseFlags()
	f, err := benchfleet.Start(ctx, benchfleet.Options{Memory: o.memory, ModelLatency: o.modelLatency, EngineLatency: o.engineLatency})
	if err != nil {
		return err
	}
	defer f.Stop()
	envSettings := f.Env
	fmt.Printf("batchbench: all roles in one process, embedded NATS JetStream, Redis %s, simulator (model %s, engine %s per call)\n",
		redact.URL(testenv.RedisURL()), o.modelLatency, o.engineLatency)
	fmt.Printf("settings: FLEET_CHAT_CONCURRENCY=%d FLEET_BATCH_CONCURRENCY=%d FLEET_SEARCH_CONCURRENCY=%d\n",
		envSettings.ChatConcurrency, envSettings.BatchConcurrency, envSettings.SearchConcurrency)
	fmt.Printf("machine: %s\n\n", benchfleet.Machine())

	c := &benchfleet.Client{Base: f.URL, HTTP: &http.Client{Transport: fleet.Transport(), Timeout: 5 * time.Minute}}
	var seq atomic.Int64
	// interactive sends one chat request that searches.
	interactive := func() (time.Duration, error) {
		return c.Ask(ctx, fmt.Sprintf("Search the web: what is new today, item %d?", seq.Add(1)-1))
	}
	if _, err := interactive(); err != nil {
		return fmt.Errorf("the fleet does not answer: %w", err)
	}
	benchfleet.OpenLoop(ctx, interactive, o.rate, o.warmup, nil, 0)
	alone := benchfleet.OpenLoop(ctx, interactive, o.rate, o.duration, nil, 0)
	report("interactive alone", alone)
	fmt.Println()

	var during benchfleet.LoadResult
	queues := newQueueWatch(f.NATSURL)
	defer queues.close()
	qs := make([]string, o.batch) // questions that search
	for i := range qs {
		qs[i] = fmt.Sprintf("Find the latest news about research subject %d", i)
	}
	for r := range o.runs {
		id, err := c.Batch(ctx, qs)
		if err != nil {
			return err
		}
		start := time.Now()
		var ended atomic.Bool
		var status benchfleet.BatchStatus
		stopWatch := queues.watch(ctx)
		go func() {
			status = c.WaitBatch(ctx, id)
			ended.Store(true)
		}()
		p := benchfleet.OpenLoop(ctx, interactive, o.rate, 0, ended.Load, 0)
		took := time.Since(start)
		stopWatch()
		during.Latencies, during.Errors = append(during.Latencies, p.Latencies...), during.Errors+p.Errors
		during.FirstErr = cmp.Or(during.FirstErr, p.FirstErr)
		fmt.Printf("batch %d: %s, %d completed + %d failed of %d in %s (%.0f questions/s); %d interactive requests meanwhile\n", r+1,
			status.Status, status.RequestCounts.Completed, status.RequestCounts.Failed, status.RequestCounts.Total,
			took.Round(10*time.Millisecond), float64(o.batch)/took.Seconds(), len(p.Latencies))
	}
	report(fmt.Sprintf("interactive during %d-question batches", o.batch), during)
	queues.report()
	ratio := float64(benchfleet.Pct(during.Latencies, 99)) / float64(max(benchfleet.Pct(alone.Latencies, 99), 1))
	verdict := "met"
	if ratio > o.goal {
		verdict = "NOT met"
	}
	fmt.Printf("p99 during / p99 alone = %.2f (goal ≤ %.1f: %s)\n", ratio, o.goal, verdict)
	return nil
}

// report prints one phase's latencies.
func report(name string, p benchfleet.LoadResult) {
	l := p.Latencies
	fmt.Printf("%-46s n=%-5d p50 %-9s p90 %-9s p99 %-9s max %-9s errors %d\n", name, len(l),
		benchfleet.Pct(l, 50).Round(100*time.Microsecond), benchfleet.Pct(l, 90).Round(100*time.Microsecond),
		benchfleet.Pct(l, 99).Round(100*time.Microsecond), benchfleet.Pct(l, 100).Round(100*time.Microsecond), p.Errors)
	if p.FirstErr != nil {
		fmt.Fprintln(os.Stderr, "first failed request:", p.FirstErr)
	}
}

// queueWatch samples the backlog (pending + unacknowledged messages) of the
// consumers interactive and batch work share or compete through, while a batch runs:
// where a batch's work waits is where interactive work waits behind it.
type queueWatch struct {
	js    jetstream.JetStream
	close func()
	mu    sync.Mutex
	max   map[string]uint64
}

// watched are the consumers sampled.
var watched = []string{bus.ConsumerChat, bus.ConsumerResume, bus.ConsumerSearch("google")}

func newQueueWatch(url string) *queueWatch {
	q := &queueWatch{max: map[string]uint64{}, close: func() {}}
	if js, close, err := benchfleet.JetStream(url); err == nil {
		q.js, q.close = js, close
	}
	return q
}

// watch samples every 20ms until the returned function is called.
func (q *queueWatch) watch(ctx context.Context) (stop func()) {
	if q.js == nil {
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wctx.Err() == nil {
			// A family's backlog is its own consumer's and its lanes' (bus.FamilyLag).
			seen := map[string]uint64{}
			benchfleet.Consumers(wctx, q.js, func(info *jetstream.ConsumerInfo) {
				family, _, _ := strings.Cut(info.Name, "__")
				seen[family] += info.NumPending + uint64(info.NumAckPending)
			})
			q.mu.Lock()
			for _, w := range watched {
				q.max[w] = max(q.max[w], seen[w])
			}
			q.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func (q *queueWatch) report() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.max) == 0 {
		return
	}
	fmt.Print("largest backlog during the batches (pending + unacknowledged):")
	for _, w := range watched {
		fmt.Printf(" %s %d;", w, q.max[w])
	}
	fmt.Println()
}
