// Command fairbench measures whether one tenant's flood leaves another tenant's work
// alone. It runs a whole fleet in this process (benchfleet: every role wired by
// fleet.Run with the production defaults, an embedded NATS JetStream, the Redis at
// REDIS_URL, the provider simulator), with two tenants, A and B, and everything on
// 127.0.0.1. B's work is measured twice, alone and while A floods:
//
//   - B: synchronous chat requests that search one engine (an open loop at -rate), a
//     -b-batch-line batch, and -b-webhooks async jobs whose callbacks go to a local
//     receiver; figures: sync p50/p99, the batch's time, each callback's latency
//     (submission to delivery).
//   - A: -a-jobs async jobs whose model call is slow (sim:model-slow), a third of them
//     searching the same engine slowly (sim:slow); -a-batches batches of -a-batch-lines
//     lines; callbacks of all its jobs to a failing path of the same receiver host.
//
// It prints B's figures of both phases side by side, A's throughput (jobs and batch
// lines completed per second during the flood, and the chat steps its slow jobs held
// on average), and whether each goal holds: sync p99 ≤ 1.5× alone, the batch ≤ 2×
// alone, callbacks ≤ 2× alone.
//
//	go run ./cmd/fairbench                (make bench-fair, about 2 minutes)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/internal/testkit/benchfleet"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/state"
)

func main() { cli.Main(run) }

type options struct {
	rate        int
	duration    time.Duration
	bLines      int
	bWebhooks   int
	aJobs       int
	aSlow       time.Duration
	aSearchSlow time.Duration
	aBatches    int
	aLines      int
	engine      string
	settle      time.Duration
	memory      bool
}

func parseFlags() options {
	var o options
	flag.IntVar(&o.rate, "rate", 10, "B's synchronous requests per second (open loop)")
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "how long B's synchronous requests run in each phase")
	flag.IntVar(&o.bLines, "b-batch-lines", 20, "lines of B's batch")
	flag.IntVar(&o.bWebhooks, "b-webhooks", 10, "B's async jobs with a callback, in each phase")
	flag.IntVar(&o.aJobs, "a-jobs", 300, "A's slow async jobs")
	flag.DurationVar(&o.aSlow, "a-model-slow", 60*time.Second, "how long each of A's model calls takes (longer than the measured phase: A holds its steps throughout)")
	flag.DurationVar(&o.aSearchSlow, "a-search-slow", 10*time.Second, "how long each of A's searches takes")
	flag.IntVar(&o.aBatches, "a-batches", 1, "A's batches")
	flag.IntVar(&o.aLines, "a-batch-lines", 20000, "lines of each of A's batches")
	flag.StringVar(&o.engine, "engine", "brave", "the engine A's slow searches and B's searches share")
	flag.DurationVar(&o.settle, "settle", 10*time.Second, "wait after A's submissions before B is measured (A's batch is expanded, its jobs hold their slots)")
	flag.BoolVar(&o.memory, "memory", false, "keep the streams in memory instead of on disk")
	flag.Parse()
	return o
}

const (
	keyA = "fairbench-key-a"
	keyB = "fairbench-key-b"
)

func run(ctx context.Context) error {
	o := parseFlags()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // bounded, whatever the flags
	defer cancel()
	hooks := newReceiver()
	defer hooks.close()
	os.Setenv("FLEET_WEBHOOK_ALLOW", "127.0.0.0/8") // the receiver is local
	os.Setenv("FAIRBENCH_KEY_A", keyA)
	os.Setenv("FAIRBENCH_KEY_B", keyB)
	f, err := benchfleet.Start(ctx, benchfleet.Options{Memory: o.memory, File: func(c *config.File) {
		c.Tenants = []config.Tenant{{ID: "tenant-a", APIKeyEnv: "FAIRBENCH_KEY_A", APIKeys: []string{keyA}},
			{ID: "tenant-b", APIKeyEnv: "FAIRBENCH_KEY_B", APIKeys: []string{keyB}}}
	}})
	if err != nil {
		return err
	}
	defer f.Stop()
	e := f.Env
	fmt.Printf("fairbench: all roles in one process, embedded NATS JetStream (%s), Redis %s, simulator, 127.0.0.1 only\n", f.Storage, redact.URL(testenv.RedisURL()))
	fmt.Printf("settings: FLEET_CHAT_CONCURRENCY=%d FLEET_SEARCH_CONCURRENCY=%d FLEET_BATCH_CONCURRENCY=%d FLEET_BATCH_RATE=%g\n",
		e.ChatConcurrency, e.SearchConcurrency, e.BatchConcurrency, e.BatchRate)
	fmt.Printf("A: %d async jobs, model call %s (a third also searching %s, %s a search), %d × %d-line batches, callbacks to a failing path of the receiver\n",
		o.aJobs, o.aSlow, o.engine, o.aSearchSlow, o.aBatches, o.aLines)
	fmt.Printf("B: sync chat searching %s at %d/s for %s, a %d-line batch, %d async jobs with callbacks to the same host\n",
		o.engine, o.rate, o.duration, o.bLines, o.bWebhooks)
	fmt.Printf("machine: %s\n\n", benchfleet.Machine())

	hc := &http.Client{Transport: fleet.Transport(), Timeout: 5 * time.Minute}
	a, b := &tenant{Client: benchfleet.Client{Base: f.URL, Key: keyA, HTTP: hc}}, &tenant{Client: benchfleet.Client{Base: f.URL, Key: keyB, HTTP: hc}}
	if _, err := b.Ask(ctx, "Search the web: warm-up? sim:engine="+o.engine); err != nil {
		return fmt.Errorf("the fleet does not answer: %w", err)
	}

	alone := measureB(ctx, o, b, hooks, "alone")
	fmt.Println()

	// A floods.
	floodStart := time.Now()
	var aJobs []string
	for i := range o.aJobs {
		// The simulator reads durations as ms or s only.
		text := fmt.Sprintf("Write a long essay, number %d. sim:nosearch sim:model-slow=%dms", i, o.aSlow.Milliseconds())
		if i%3 == 0 {
			text = fmt.Sprintf("Search the web: weather in town %d? sim:engine=%s sim:slow=%dms", i, o.engine, o.aSearchSlow.Milliseconds())
		}
		id, err := a.Submit(ctx, text, hooks.url("/fail"))
		if err != nil {
			return fmt.Errorf("tenant A's job %d: %w", i, err)
		}
		aJobs = append(aJobs, id)
	}
	var aBatches []string
	for i := range o.aBatches {
		id, err := a.batch(ctx, o.aLines, fmt.Sprintf("A's batch %d", i))
		if err != nil {
			return fmt.Errorf("tenant A's batch: %w", err)
		}
		aBatches = append(aBatches, id)
	}
	fmt.Printf("A submitted %d jobs and %d batches in %s\n", len(aJobs), len(aBatches), time.Since(floodStart).Round(time.Millisecond))
	time.Sleep(o.settle)
	// A's lines are counted right at the phase's ends (its jobs, 300 reads, around them).
	aDoneBefore := a.ended(ctx, aJobs)
	aLinesBefore := a.linesDone(ctx, aBatches)
	phaseStart := time.Now()
	during := measureB(ctx, o, b, hooks, "during A's flood")
	phase := time.Since(phaseStart)
	aLines := a.linesDone(ctx, aBatches) - aLinesBefore
	aDone := a.ended(ctx, aJobs) - aDoneBefore
	lanes(ctx, f.NATSURL)
	fmt.Println()

	fmt.Printf("%-34s %14s %18s %8s\n", "B", "alone", "during A's flood", "ratio")
	row := func(name string, x, y time.Duration) float64 {
		r := float64(y) / float64(max(x, 1))
		fmt.Printf("%-34s %14s %18s %8.2f\n", name, x.Round(100*time.Microsecond), y.Round(100*time.Microsecond), r)
		return r
	}
	row("sync p50", benchfleet.Pct(alone.sync, 50), benchfleet.Pct(during.sync, 50))
	syncRatio := row("sync p99", benchfleet.Pct(alone.sync, 99), benchfleet.Pct(during.sync, 99))
	batchRatio := row(fmt.Sprintf("%d-line batch", o.bLines), alone.batch, during.batch)
	row("callback p50", benchfleet.Pct(alone.hooks, 50), benchfleet.Pct(during.hooks, 50))
	hookRatio := row("callback max", benchfleet.Pct(alone.hooks, 100), benchfleet.Pct(during.hooks, 100))
	fmt.Printf("B's errors: %d alone, %d during; callbacks delivered %d/%d alone, %d/%d during\n",
		alone.errs, during.errs, len(alone.hooks), o.bWebhooks, len(during.hooks), o.bWebhooks)
	fmt.Printf("A during B's measured phase (%s): %d of its slow jobs ended, %d chat steps and %d %s searches in flight at its end (of %d and %d); %d batch lines ended (%.1f/s)\n",
		phase.Round(time.Millisecond), aDone, steps(f, bus.ConsumerChat), steps(f, bus.ConsumerSearch(o.engine)), o.engine, e.ChatConcurrency, e.SearchConcurrency, aLines, float64(aLines)/phase.Seconds())
	fmt.Printf("A's failing callbacks received: %d\n", hooks.failed.Load())
	verdict := func(r, goal float64) string {
		if r <= goal {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("goals: sync p99 ≤ 1.5× alone: %s; batch ≤ 2× alone: %s; callbacks ≤ 2× alone: %s\n",
		verdict(syncRatio, 1.5), verdict(batchRatio, 2), verdict(hookRatio, 2))
	return nil
}

// bPhase is what B saw in one phase.
type bPhase struct {
	cpu   float64 // cores this process used
	sync  []time.Duration
	errs  int
	batch time.Duration
	hooks []time.Duration
}

// measureB runs B's work: the sync loop, with its batch and its callback jobs
// submitted at the loop's start.
func measureB(ctx context.Context, o options, b *tenant, hooks *receiver, name string) bPhase {
	var p bPhase
	cpu0, t0 := benchfleet.ProcessCPU(), time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		start := time.Now()
		id, err := b.batch(ctx, o.bLines, "B's batch "+name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "B's batch:", err)
			return
		}
		b.WaitBatch(ctx, id)
		p.batch = time.Since(start)
	}()
	go func() {
		defer wg.Done()
		p.hooks = b.callbacks(ctx, o.bWebhooks, hooks, 2*o.duration)
	}()
	ask := func() (time.Duration, error) {
		return b.Ask(ctx, fmt.Sprintf("Search the web: what is new today, item %d? sim:engine="+o.engine, b.seq.Add(1)))
	}
	r := benchfleet.OpenLoop(ctx, ask, o.rate, o.duration, nil, 0)
	if r.FirstErr != nil {
		fmt.Fprintln(os.Stderr, "B's request failed:", r.FirstErr)
	}
	p.sync, p.errs = r.Latencies, r.Errors
	wg.Wait()
	p.cpu = float64(benchfleet.ProcessCPU()-cpu0) / float64(time.Since(t0))
	fmt.Printf("[load %s, this process %.2f cores] B %-18s sync n=%-4d p50 %-9s p99 %-9s errors %d; %d-line batch %s; callbacks %d, p50 %s, max %s\n", benchfleet.LoadAvg(), p.cpu, name,
		len(p.sync), benchfleet.Pct(p.sync, 50).Round(100*time.Microsecond), benchfleet.Pct(p.sync, 99).Round(100*time.Microsecond), p.errs,
		o.bLines, p.batch.Round(time.Millisecond), len(p.hooks), benchfleet.Pct(p.hooks, 50).Round(time.Millisecond), benchfleet.Pct(p.hooks, 100).Round(time.Millisecond))
	return p
}

// tenant talks to the fleet with one tenant's key.
type tenant struct {
	benchfleet.Client
	seq atomic.Int64
}

// batch submits n questions that do not search.
func (t *tenant) batch(ctx context.Context, n int, name string) (string, error) {
	qs := make([]string, n)
	for i := range qs {
		qs[i] = fmt.Sprintf("%s, question %d: say something short. sim:nosearch", name, i)
	}
	return t.Batch(ctx, qs)
}

// linesDone counts the lines of batches that have ended.
func (t *tenant) linesDone(ctx context.Context, ids []string) int {
	n := 0
	for _, id := range ids {
		c := t.BatchStatus(ctx, id).RequestCounts
		n += c.Completed + c.Failed
	}
	return n
}

// ended counts the jobs that have ended.
func (t *tenant) ended(ctx context.Context, ids []string) int {
	n := 0
	for _, id := range ids {
		_, b, err := t.Do(ctx, "GET", "/v1/jobs/"+id, nil)
		if err != nil {
			continue
		}
		var j struct {
			Status string `json:"status"`
		}
		json.Unmarshal(b, &j)
		if state.Status(j.Status).Terminal() {
			n++
		}
	}
	return n
}

// callbacks submits n async jobs whose callbacks go to the receiver's ok path and
// returns each one's latency, submission to delivery (those delivered within wait).
func (t *tenant) callbacks(ctx context.Context, n int, r *receiver, wait time.Duration) []time.Duration {
	type sent struct {
		id string
		at time.Time
	}
	var all []sent
	for i := range n {
		at := time.Now()
		id, err := t.Submit(ctx, fmt.Sprintf("Say something short, note %d. sim:nosearch", i), r.url("/ok"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "B's callback job:", err)
			continue
		}
		all = append(all, sent{id, at})
	}
	deadline := time.Now().Add(wait)
	var out []time.Duration
	for _, s := range all {
		if at, ok := r.await(ctx, s.id, time.Until(deadline)); ok {
			out = append(out, at.Sub(s.at))
		}
	}
	return out
}

// receiver takes the callbacks: /ok answers 200 and notes when each job's arrived,
// /fail answers 500.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    map[string]time.Time
	failed atomic.Int64
}

func newReceiver() *receiver {
	r := &receiver{got: map[string]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/fail", func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.failed.Add(1)
		http.Error(w, "failing", http.StatusInternalServerError)
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var ev struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		json.Unmarshal(b, &ev)
		id := ev.Data.ID
		r.mu.Lock()
		if _, ok := r.got[id]; !ok {
			r.got[id] = time.Now()
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	r.srv = httptest.NewServer(mux)
	return r
}

func (r *receiver) url(path string) string { return r.srv.URL + path }

// await waits up to d for job id's callback and returns when it arrived.
func (r *receiver) await(ctx context.Context, id string, d time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(d)
	for {
		r.mu.Lock()
		at, ok := r.got[id]
		r.mu.Unlock()
		if ok || time.Now().After(deadline) || ctx.Err() != nil {
			return at, ok
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *receiver) close() { r.srv.Close() }

// lanes prints each lane consumer's backlog: waiting (num_pending) and in progress
// (num_ack_pending).
func lanes(ctx context.Context, url string) {
	js, close, err := benchfleet.JetStream(url)
	if err != nil {
		return
	}
	defer close()
	fmt.Print("lanes (waiting/in progress):")
	err = benchfleet.Consumers(ctx, js, func(info *jetstream.ConsumerInfo) {
		if strings.Contains(info.Name, "__") && info.NumPending+uint64(info.NumAckPending) > 0 {
			fmt.Printf(" %s %d/%d;", info.Name, info.NumPending, info.NumAckPending)
		}
	})
	if err != nil {
		fmt.Printf(" (%v)", err)
	}
	fmt.Println()
}

// steps reads the fleet's gauge of a consumer family's handlers in progress.
func steps(f *benchfleet.Fleet, consumer string) int {
	var m dto.Metric
	if f.Metrics.StepsInFlight.WithLabelValues(consumer).Write(&m) != nil {
		return -1
	}
	return int(m.GetGauge().GetValue())
}
