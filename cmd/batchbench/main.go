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
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
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
	base, natsURL, envSettings := f.URL, f.NATSURL, f.Env
	fmt.Printf("batchbench: all roles in one process, embedded NATS JetStream, Redis %s, simulator (model %s, engine %s per call)\n",
		redact.URL(testenv.RedisURL()), o.modelLatency, o.engineLatency)
	fmt.Printf("settings: FLEET_CHAT_CONCURRENCY=%d FLEET_BATCH_CONCURRENCY=%d FLEET_SEARCH_CONCURRENCY=%d\n",
		envSettings.ChatConcurrency, envSettings.BatchConcurrency, envSettings.SearchConcurrency)
	fmt.Printf("machine: %s\n\n", benchfleet.Machine())

	c := &client{base: base, http: &http.Client{Transport: fleet.Transport(), Timeout: 5 * time.Minute}}
	if _, err := c.interactive(ctx, 0); err != nil {
		return fmt.Errorf("the fleet does not answer: %w", err)
	}
	ask := func() (time.Duration, error) { return c.interactive(ctx, c.seq.Add(1)) }
	benchfleet.OpenLoop(ctx, ask, o.rate, o.warmup, nil, 0)
	alone := benchfleet.OpenLoop(ctx, ask, o.rate, o.duration, nil, 0)
	report("interactive alone", alone)
	fmt.Println()

	var during benchfleet.LoadResult
	queues := newQueueWatch(natsURL)
	defer queues.close()
	for r := range o.runs {
		id, err := c.submitBatch(ctx, o.batch)
		if err != nil {
			return err
		}
		start := time.Now()
		var ended atomic.Bool
		var status batchStatus
		stopWatch := queues.watch(ctx)
		go func() {
			status = c.waitBatch(ctx, id)
			ended.Store(true)
		}()
		p := benchfleet.OpenLoop(ctx, ask, o.rate, 0, ended.Load, 0)
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

// client drives the fleet's API.
type client struct {
	base string
	http *http.Client
	seq  atomic.Int64
}

// interactive sends one chat request that searches and returns its latency.
func (c *client) interactive(ctx context.Context, i int64) (time.Duration, error) {
	return benchfleet.Ask(ctx, c.http, c.base, fmt.Sprintf("Search the web: what is new today, item %d?", i))
}

// batchStatus is the part of a batch object the benchmark reads.
type batchStatus struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
}

// submitBatch submits n questions that search, as the simple form.
func (c *client) submitBatch(ctx context.Context, n int) (string, error) {
	qs := make([]string, n)
	for i := range qs {
		qs[i] = fmt.Sprintf("Find the latest news about research subject %d", i)
	}
	body, _ := json.Marshal(map[string]any{"queries": qs, "model": demo.Model})
	req, _ := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/batches", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b batchStatus
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("creating the batch: status %d, %v", resp.StatusCode, err)
	}
	return b.ID, nil
}

// waitBatch polls a batch until it ends.
func (c *client) waitBatch(ctx context.Context, id string) batchStatus {
	var b batchStatus
	for ctx.Err() == nil {
		resp, err := c.http.Get(c.base + "/v1/batches/" + id)
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&b)
			resp.Body.Close()
			switch b.Status {
			case "completed", "failed", "expired", "cancelled":
				return b
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b
}

// phase is what one measured phase saw.
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
	nc  *natsgo.Conn
	js  jetstream.JetStream
	mu  sync.Mutex
	max map[string]uint64
}

// watched are the consumers sampled, by stream.
var watched = [][2]string{
	{bus.StreamJobs, bus.ConsumerChat},
	{bus.StreamChat, bus.ConsumerResume}, {bus.StreamSearch, bus.ConsumerSearch("google")},
}

func newQueueWatch(url string) *queueWatch {
	q := &queueWatch{max: map[string]uint64{}}
	nc, err := natsgo.Connect(url)
	if err != nil {
		return q
	}
	q.nc = nc
	q.js, _ = jetstream.New(nc)
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
			for _, stream := range []string{bus.StreamJobs, bus.StreamChat, bus.StreamSearch} {
				s, err := q.js.Stream(wctx, stream)
				if err != nil {
					continue
				}
				infos := s.ListConsumers(wctx)
				for info := range infos.Info() {
					family, _, _ := strings.Cut(info.Name, "__")
					seen[family] += info.NumPending + uint64(info.NumAckPending)
				}
			}
			q.mu.Lock()
			for _, w := range watched {
				q.max[w[1]] = max(q.max[w[1]], seen[w[1]])
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
		fmt.Printf(" %s %d;", w[1], q.max[w[1]])
	}
	fmt.Println()
}

func (q *queueWatch) close() {
	if q.nc != nil {
		q.nc.Close()
	}
}
