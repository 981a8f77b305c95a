// Command researchbench measures research runs (make bench-research): with the
// simulator's latencies (model 1–3 s, search 0.3–0.8 s by default) and a page server
// on loopback that every child reads a page from where its effort lets it fetch
// (0.2–0.5 s a page), a run's wall time
// at each effort against (a) the same plan run one child at a time and (b) its
// critical path (planner + the longest child chain + writer, reflection included);
// how wall time changes with 1, 2 and 4 search-worker processes when the engine is the
// bottleneck (each process capped at -search-cap searches at once); and per run its
// paid calls, pages read, NATS messages and Redis commands.
//
// The sequential time is measured from the run itself: its brain steps' durations
// (from its events) plus the sum of its children's own durations (from their job
// records), i.e. what the same plan takes when one child runs at a time and nothing
// waits for a worker.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/benchfleet"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/state"
)

func main() { cli.Main(run) }

type options struct {
	efforts            []string
	workers            []int
	modelLo, modelHi   time.Duration
	searchLo, searchHi time.Duration
	fetchLo, fetchHi   time.Duration
	searchCap          int
	memory             bool
}

func run(ctx context.Context) error {
	var o options
	fs := flag.NewFlagSet("researchbench", flag.ContinueOnError)
	efforts := fs.String("efforts", "low,medium,high", "efforts to measure")
	workers := fs.String("search-workers", "1,2,4", "search-worker process counts of the scaling phase (empty: skip it)")
	fs.DurationVar(&o.modelLo, "model-latency", time.Second, "simulated model latency, least")
	fs.DurationVar(&o.modelHi, "model-latency-max", 3*time.Second, "simulated model latency, most")
	fs.DurationVar(&o.searchLo, "search-latency", 300*time.Millisecond, "simulated search latency, least")
	fs.DurationVar(&o.searchHi, "search-latency-max", 800*time.Millisecond, "simulated search latency, most")
	fs.DurationVar(&o.fetchLo, "fetch-latency", 200*time.Millisecond, "page server latency, least")
	fs.DurationVar(&o.fetchHi, "fetch-latency-max", 500*time.Millisecond, "page server latency, most")
	fs.IntVar(&o.searchCap, "search-cap", 1, "searches one search-worker process runs at once in the scaling phase (the engine bottleneck)")
	fs.BoolVar(&o.memory, "memory", true, "streams in memory")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	o.efforts = strings.Split(*efforts, ",")
	o.workers = benchfleet.Ints(*workers)
	pages := pageServer(o.fetchLo, o.fetchHi)
	defer pages.Close()
	os.Setenv("FLEET_FETCH_ALLOW", "127.0.0.0/8") // the page server
	fmt.Printf("researchbench: model %s–%s, search %s–%s, page %s–%s (%s)\n\n", o.modelLo, o.modelHi, o.searchLo, o.searchHi, o.fetchLo, o.fetchHi, benchfleet.Machine())

	f, err := start(ctx, o, 0)
	if err != nil {
		return err
	}
	fmt.Println("| effort | sub-questions | children | wall | critical path | wall ÷ critical | sequential | sequential ÷ wall | paid model calls | paid searches | pages read | NATS messages | Redis commands |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	var highWall time.Duration
	for _, e := range o.efforts {
		m, err := measure(ctx, f, e, pages.URL)
		if err != nil {
			f.Stop()
			return err
		}
		if e == "high" {
			highWall = m.wall
		}
		fmt.Printf("| %s | %d | %d | %.1f s | %.1f s | %.2f | %.1f s | %.1f× | %d | %d | %d | %d | %d |\n", e, m.subQuestions, m.children,
			m.wall.Seconds(), m.critical.Seconds(), m.wall.Seconds()/m.critical.Seconds(), m.sequential.Seconds(), m.sequential.Seconds()/m.wall.Seconds(),
			m.modelCalls, m.searches, m.pagesRead, m.natsMsgs, m.redisCmds)
	}
	f.Stop()
	if len(o.workers) == 0 {
		return nil
	}
	fmt.Printf("\nscaling (effort high, each search-worker process capped at %d searches at once):\n\n", o.searchCap)
	fmt.Println("| search-worker processes | searches at once | wall | wall ÷ uncapped wall |")
	fmt.Println("|--:|--:|--:|--:|")
	for _, n := range o.workers {
		f, err := start(ctx, o, o.searchCap)
		if err != nil {
			return err
		}
		stops := searchWorkers(ctx, f, n-1, o.searchCap)
		m, err := measure(ctx, f, "high", pages.URL)
		if err == nil {
			ratio := "–"
			if highWall > 0 {
				ratio = fmt.Sprintf("%.2f", m.wall.Seconds()/highWall.Seconds())
			}
			fmt.Printf("| %d | %d | %.1f s | %s |\n", n, n*o.searchCap, m.wall.Seconds(), ratio)
		}
		for _, s := range stops {
			s()
		}
		f.Stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// start runs the benchmark fleet; searchCap > 0 caps its search role's concurrency.
func start(ctx context.Context, o options, searchCap int) (*benchfleet.Fleet, error) {
	if searchCap > 0 {
		os.Setenv("FLEET_SEARCH_CONCURRENCY", strconv.Itoa(searchCap))
	} else {
		os.Unsetenv("FLEET_SEARCH_CONCURRENCY")
	}
	return benchfleet.Start(ctx, benchfleet.Options{Memory: o.memory, ModelLatency: o.modelLo, ModelLatencyMax: o.modelHi,
		EngineLatency: o.searchLo, EngineLatencyMax: o.searchHi})
}

// searchWorkers starts n more search-worker processes (fleets of the search role
// alone, on the same NATS and Redis), each capped at searchCap searches at once.
func searchWorkers(ctx context.Context, f *benchfleet.Fleet, n, searchCap int) []func() {
	var stops []func()
	for range n {
		e := f.Env
		e.SearchConcurrency = searchCap
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			err := fleet.Run(wctx, fleet.Options{Env: e, File: demo.Config(f.SimURL, f.Sim.EngineConfigs(f.SimURL)), Roles: fleet.Roles{Search: true},
				Redis: f.Redis, Metrics: nil, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), Memory: true})
			if err != nil && wctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "search worker:", err)
			}
		}()
		stops = append(stops, func() { cancel(); <-done })
	}
	time.Sleep(time.Second) // their consumers bound
	return stops
}

type result struct {
	subQuestions, children         int
	wall, critical, sequential     time.Duration
	modelCalls, searches, natsMsgs int
	// pagesRead counts the pages the children read (the run's fetch events without
	// an error).
	pagesRead int
	redisCmds int64
}

// measure runs one research run at effort, its children reading pages of pages, and
// reads its figures.
func measure(ctx context.Context, f *benchfleet.Fleet, effort, pages string) (result, error) {
	var m result
	hc := &http.Client{Timeout: 30 * time.Second}
	js, closeNATS, err := benchfleet.JetStream(f.NATSURL)
	if err != nil {
		return m, err
	}
	defer closeNATS()
	seqs := func() uint64 {
		var n uint64
		for name := range js.StreamNames(ctx).Name() {
			if s, err := js.Stream(ctx, name); err == nil { // its info as of now
				n += s.CachedInfo().State.LastSeq
			}
		}
		return n
	}
	beforeSim, beforeMsgs, beforeRedis := f.Sim.Stats().Requests, seqs(), f.Counter.Counts().Commands
	start := time.Now()
	status, b, err := (&benchfleet.Client{Base: f.URL, HTTP: hc}).Do(ctx, "POST", "/v1/research", map[string]any{
		"input": fmt.Sprintf("How do offshore wind farms work (bench %d)? sim:read=%s", time.Now().UnixNano(), pages), "model": "research/" + demo.Model, "effort": effort})
	if err != nil {
		return m, err
	}
	if status != http.StatusAccepted {
		return m, fmt.Errorf("POST /v1/research: %d %s", status, b)
	}
	var v struct {
		ID string `json:"id"`
	}
	json.Unmarshal(b, &v)
	store := state.New(f.Redis, f.Env.KeyPrefix, time.Hour)
	var r *state.Run
	for {
		if r, err = store.Research.GetRun(ctx, v.ID); err != nil {
			return m, err
		}
		if state.RunEnded(r.Status) {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return m, fmt.Errorf("run %s did not end", v.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.wall = time.Since(start)
	if r.Status != state.RunCompleted {
		return m, fmt.Errorf("run %s %s: %s", v.ID, r.Status, r.Error)
	}
	time.Sleep(500 * time.Millisecond) // the last acks and finish hooks
	afterSim := f.Sim.Stats().Requests
	m.modelCalls = int(afterSim["model"] - beforeSim["model"])
	for k, n := range afterSim {
		if k != "model" && !strings.HasPrefix(k, "model_") {
			m.searches += int(n - beforeSim[k])
		}
	}
	m.natsMsgs = int(seqs() - beforeMsgs)
	m.redisCmds = f.Counter.Counts().Commands - beforeRedis

	// The brain steps' times from the events; the children's from their records.
	evs, err := store.Research.RunEvents(ctx, v.ID, 0, 10_000)
	if err != nil {
		return m, err
	}
	at := map[string]time.Time{}
	for _, e := range evs {
		var ev struct {
			Type  string `json:"type"`
			MS    int64  `json:"at_ms"`
			Error string `json:"error"`
		}
		json.Unmarshal(e.Data, &ev)
		if ev.Type == "fetch" && ev.Error == "" {
			m.pagesRead++
		}
		if _, ok := at[ev.Type]; !ok { // the first of each: the reflection between rounds 0 and 1
			at[ev.Type] = time.UnixMilli(ev.MS)
		}
	}
	plan := at["plan"].Sub(r.Created)
	var seqChildren, critical time.Duration
	roundEnd := at["plan"]
	for n, rd := range r.Rounds {
		m.subQuestions += max(rd.Submitted, 0)
		var longest time.Duration
		var last time.Time
		for i := range max(rd.Submitted, 0) {
			j, err := store.Jobs.GetJob(ctx, childIDOf(r.ID, n, i))
			if err != nil {
				return m, err
			}
			m.children++
			d := j.Finished.Sub(j.Created)
			seqChildren += d
			longest = max(longest, d)
			if j.Finished.After(last) {
				last = j.Finished
			}
		}
		critical += longest
		roundEnd = last
		if n == 0 && len(r.Rounds) > 1 {
			// The reflection between the rounds is on every path (a later one is in the
			// writer's time: from the last child's end to the draft).
			refl := at["reflection"].Sub(last)
			critical += refl
			seqChildren += refl
		}
	}
	write := at["draft"].Sub(roundEnd)
	m.critical = plan + critical + write
	m.sequential = plan + seqChildren + write
	return m, nil
}

// childIDOf is research's child id rule (pkg/research childID).
func childIDOf(runID string, round, i int) string {
	return "job_" + strings.TrimPrefix(runID, "rr_") + "r" + strconv.Itoa(round) + "q" + strconv.Itoa(i)
}

// pageServer serves a page at every path, each after a latency between lo and hi
// drawn from its path: what a child's web_fetch reads.
func pageServer(lo, hi time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := lo
		if hi > lo {
			wait += time.Duration(crc32.ChecksumIEEE([]byte(r.URL.Path))) % (hi - lo + 1)
		}
		time.Sleep(wait)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><head><title>Offshore wind, page %s</title></head><body><main><h1>Offshore wind</h1>"+
			"<p>Offshore wind farms turn the wind over the sea into electricity; this page (%s) was served by the benchmark.</p></main></body></html>", r.URL.Path, r.URL.Path)
	}))
}
