// Package chaos is the fleet's chaos suite (`make chaos`): it runs the ingress,
// chatworker and searchworker binaries as separate processes against their own
// nats-server (JetStream, sync_interval: always, built from the nats-server/v2 version
// the fleet embeds) and redis-server (appendonly, appendfsync always), with the
// provider simulator at realistic latency and a webhook receiver that verifies every
// signature. Clients submit jobs with Idempotency-Keys and callbacks, retrying every
// unfinished answer, while a scenario kills processes, restarts the servers or takes
// the receiver down. Afterwards every job is checked: accepted → exactly one terminal
// outcome, one terminal webhook id, no paid call repeated unless its caller died with
// it in flight, and a re-post of its key answers the same job.
//
// Each scenario gets a fresh world (servers, simulator, receiver, processes, data
// directory), so its figures are its own. Everything listens on 127.0.0.1.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configure a run.
type Options struct {
	// Jobs is the number of submissions of the ingress-kill scenario; the others
	// submit OtherJobs each.
	Jobs, OtherJobs int
	// Duration is how long the ingress-kill scenario submits for; the others submit
	// for OtherDuration.
	Duration, OtherDuration time.Duration
	// IngressKills is how often the ingress-kill scenario kills the ingress.
	IngressKills int
	// Scenarios to run, by name (empty: all).
	Scenarios []string
	// Dir holds the binaries, each scenario's servers' data and every process's log.
	Dir string
	// Run names this run in keys and texts ("" = from the clock).
	Run string
	// Seed makes the choice of victims and timings repeatable.
	Seed uint64

	ModelLatency, EngineLatency time.Duration
	// JobTimeout is FLEET_JOB_TIMEOUT: how soon the reaper fails a job that stalled.
	JobTimeout time.Duration
	// AckWait is FLEET_ACK_WAIT: how soon a dead worker's message moves on.
	AckWait time.Duration
	// WebhookSchedule is FLEET_WEBHOOK_SCHEDULE.
	WebhookSchedule []time.Duration
	// ReceiverDown is how long the receiver-down scenario keeps the receiver down.
	ReceiverDown time.Duration
	// GiveUp is how long a client retries one submission.
	GiveUp time.Duration
	// IngressReplicas is how many ingress processes run behind the balancer (1 or 2).
	// With one, every kill takes down every submission in flight (and the ingress is
	// down while it restarts); with two, the other replica serves meanwhile.
	IngressReplicas int
	// Parallel runs the scenarios at the same time (each in its own world) instead of
	// one after another: the quick run's way to be quick.
	Parallel bool

	Log io.Writer // progress (default stderr)
}

// Defaults are the default run: about 9 minutes on the 2-core development machine.
func Defaults() Options {
	return Options{
		Jobs: 2000, Duration: 100 * time.Second, IngressKills: 40, OtherJobs: 300, OtherDuration: 30 * time.Second,
		ModelLatency: 400 * time.Millisecond, EngineLatency: 700 * time.Millisecond,
		JobTimeout: 30 * time.Second, AckWait: 4 * time.Second,
		WebhookSchedule: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second},
		ReceiverDown:    15 * time.Second, GiveUp: 30 * time.Second, Dir: ".data/chaos", IngressReplicas: 2,
	}
}

// Quick is the smoke run: every scenario, small, all at once (about 2 minutes).
func Quick() Options {
	o := Defaults()
	o.Jobs, o.Duration, o.IngressKills = 200, 20*time.Second, 8
	o.OtherJobs, o.OtherDuration = 60, 15*time.Second
	o.JobTimeout, o.ReceiverDown, o.GiveUp = 25*time.Second, 6*time.Second, 20*time.Second
	o.Parallel = true
	return o
}

// scenario is one way of hurting the fleet while clients submit.
type scenario struct {
	name string
	// doc says what the scenario does, for the report.
	doc string
	// big: the scenario submits Options.Jobs over Options.Duration (else the Other*).
	big bool
	// waitDeadline: the check waits until the last job's deadline has passed, so a
	// reaper that would contradict a finished job has had its chance.
	waitDeadline bool
	// wipes: Redis is restarted empty; jobs accepted before that are orphans.
	wipes bool
	// research: the submissions are research runs (POST /v1/research), each a plan,
	// child jobs and a writer; a run's end is its record and its webhook (it has no
	// terminal event of its own).
	research bool
	// hurt runs during the submission phase, which lasts d.
	hurt func(ctx context.Context, r *rig, rnd *rand.Rand, o Options, d time.Duration) string
}

var scenarios = []scenario{
	{name: "ingress-kill", big: true, doc: "SIGKILL an ingress replica {kills} times (once another one serves, and it has submissions in flight) while clients retry every submission with its key",
		hurt: func(ctx context.Context, r *rig, rnd *rand.Rand, o Options, d time.Duration) string {
			kills := 0
			for k := range o.IngressKills {
				at := d * time.Duration(k+1) / time.Duration(o.IngressKills+1)
				if !sleepUntil(ctx, r.phaseStart.Add(at+jitter(rnd, d/time.Duration(4*(o.IngressKills+1))))) {
					break
				}
				// Kill one replica once the other serves: a load balancer in front of
				// replicas, one of which dies now and then, never all at once.
				i := rnd.IntN(len(r.ingress))
				other := (i + 1) % len(r.ingress) // itself, with one replica: kill it once it serves
				if err := r.waitIngress(ctx, other, 20*time.Second); err != nil {
					r.logf("ingress-kill: %v", err)
					continue
				}
				// Kill under load: once the replica has submissions in flight (at most
				// 2s later), as a crash in production lands among requests.
				for wait := time.Now().Add(2 * time.Second); r.lb.inflight[i].Load() < 1 && time.Now().Before(wait); {
					sleep(ctx, time.Millisecond)
				}
				r.killRestart(ctx, "ingress", r.ingress[i], 0)
				kills++
			}
			return fmt.Sprintf("%d ingress kills", kills)
		}},
	{name: "worker-kill", doc: "SIGKILL a random chat or search worker every ~3s, restart it 0.5–2s later",
		hurt: func(ctx context.Context, r *rig, rnd *rand.Rand, o Options, d time.Duration) string {
			return workerKills(ctx, r, rnd, d)
		}},
	{name: "research-kill", research: true, doc: "research runs (a plan, three child jobs, a writer each) while a random chat or search worker is SIGKILLed every ~3s and restarted 0.5–2s later",
		hurt: func(ctx context.Context, r *rig, rnd *rand.Rand, o Options, d time.Duration) string {
			return workerKills(ctx, r, rnd, d)
		}},
	{name: "nats-restart", waitDeadline: true, doc: "kill -9 nats-server twice, restart it on the same store 2s later",
		hurt: func(ctx context.Context, r *rig, rnd *rand.Rand, o Options, d time.Duration) string {
			n := 0
			for k := 1; k <= 2; k++ {
				if !sleepUntil(ctx, r.phaseStart.Add(d*time.Duration(k)/3+jitter(rnd, time.Second))) {
					break
				}
				r.restartNATS(ctx, 2*time.Second)
				n++
			}
			return fmt.Sprintf("%d nats-server kill -9 + restart", n)
		}},
	{name: "redis-restart", waitDeadline: true, doc: "kill -9 redis-server twice, restart it on its own data 1s later (appendfsync always)",
		hurt: func(ctx context.Context, r *rig, rnd *rand.Rand, o Options, d time.Duration) string {
			n := 0
			for k := 1; k <= 2; k++ {
				if !sleepUntil(ctx, r.phaseStart.Add(d*time.Duration(k)/3+jitter(rnd, time.Second))) {
					break
				}
				r.restartRedis(ctx, time.Second, false)
				n++
			}
			return fmt.Sprintf("%d redis-server kill -9 + restart", n)
		}},
	{name: "redis-empty", wipes: true, doc: "kill -9 redis-server once and restart it empty: every job in flight is an orphan",
		hurt: func(ctx context.Context, r *rig, rnd *rand.Rand, o Options, d time.Duration) string {
			if !sleepUntil(ctx, r.phaseStart.Add(d/2)) {
				return "interrupted"
			}
			r.restartRedis(ctx, time.Second, true)
			return "1 redis-server kill -9 + restart empty"
		}},
	{name: "receiver-down", doc: "take the webhook receiver down for {down} (connections refused), then bring it back",
		hurt: func(ctx context.Context, r *rig, rnd *rand.Rand, o Options, d time.Duration) string {
			if !sleepUntil(ctx, r.phaseStart.Add(d/4)) {
				return "interrupted"
			}
			r.recv.down()
			r.note("down", "receiver", "receiver")
			sleep(ctx, o.ReceiverDown)
			if err := r.recv.up(); err != nil {
				r.logf("receiver up: %v", err)
			}
			r.note("up", "receiver", "receiver")
			return fmt.Sprintf("receiver down %s", o.ReceiverDown)
		}},
}

// workerKills SIGKILLs a random chat or search worker every ~3s for d, restarting it
// 0.5–2s later.
func workerKills(ctx context.Context, r *rig, rnd *rand.Rand, d time.Duration) string {
	chat, search := 0, 0
	for time.Since(r.phaseStart) < d-2*time.Second {
		if !sleep(ctx, 2*time.Second+jitter(rnd, 2*time.Second)) {
			break
		}
		pause := 500*time.Millisecond + jitter(rnd, 1500*time.Millisecond)
		if rnd.IntN(2) == 0 {
			r.killRestart(ctx, "chat", r.chat[rnd.IntN(len(r.chat))], pause)
			chat++
		} else {
			r.killRestart(ctx, "search", r.search[rnd.IntN(len(r.search))], pause)
			search++
		}
	}
	return fmt.Sprintf("%d chat + %d search worker kills", chat, search)
}

// describe is the scenario's doc with the run's figures filled in.
func (sc scenario) describe(o Options) string {
	return strings.NewReplacer("{kills}", fmt.Sprint(o.IngressKills), "{down}", o.ReceiverDown.String()).Replace(sc.doc)
}

// ScenarioNames lists the scenarios in the order they run.
func ScenarioNames() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return out
}

func jitter(rnd *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rnd.Int64N(int64(d)))
}

func sleepUntil(ctx context.Context, t time.Time) bool { return sleep(ctx, time.Until(t)) }

// Run builds the binaries and runs the chosen scenarios one after another, printing
// each one's row as it finishes; it returns the rows.
func Run(ctx context.Context, o Options) ([]Row, Binaries, error) {
	if o.Log == nil {
		o.Log = os.Stderr
	}
	for _, n := range o.Scenarios {
		if !slices.Contains(ScenarioNames(), n) {
			return nil, Binaries{}, fmt.Errorf("no scenario %q (have %s)", n, strings.Join(ScenarioNames(), ", "))
		}
	}
	if o.Run == "" {
		o.Run = strings.ToLower(fmt.Sprintf("%x", time.Now().Unix()))
	}
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		fmt.Fprintf(o.Log, "%s chaos: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		logMu.Unlock()
	}
	root, err := filepath.Abs(filepath.Join(o.Dir, o.Run))
	if err != nil {
		return nil, Binaries{}, err
	}
	logf("building the binaries and nats-server into %s", filepath.Join(root, "bin"))
	bins, err := Build(ctx, filepath.Join(root, "bin"))
	if err != nil {
		return nil, bins, err
	}
	logf("%s; %s", bins.NATSVersion, bins.RedisServer)
	var chosen []scenario
	for _, sc := range scenarios {
		if len(o.Scenarios) == 0 || slices.Contains(o.Scenarios, sc.name) {
			chosen = append(chosen, sc)
		}
	}
	rows := make([]Row, len(chosen))
	errs := make([]error, len(chosen))
	one := func(i int) {
		sc := chosen[i]
		rnd := rand.New(rand.NewPCG(o.Seed, uint64(i)))
		row, err := runScenario(ctx, sc, o, bins, filepath.Join(root, sc.name), rnd, logf)
		if err != nil {
			errs[i] = fmt.Errorf("scenario %s: %w", sc.name, err)
			return
		}
		rows[i] = row
		logf("%s: %s", sc.name, row.verdict())
	}
	if o.Parallel {
		var wg sync.WaitGroup
		for i := range chosen {
			wg.Add(1)
			go func() { defer wg.Done(); one(i) }()
		}
		wg.Wait()
	} else {
		for i := range chosen {
			if one(i); errs[i] != nil {
				break
			}
		}
	}
	var done []Row
	for i, r := range rows {
		if errs[i] == nil && r.Scenario != "" {
			done = append(done, r)
		}
	}
	if f, err := os.Create(filepath.Join(root, "report.md")); err == nil {
		fmt.Fprintf(f, "chaos run %s (%s, %s)\n\n", o.Run, bins.NATSVersion, bins.RedisServer)
		PrintTable(f, done)
		f.Close()
		logf("report and every process's log: %s", root)
	}
	return done, bins, errors.Join(errs...)
}

// runScenario runs one scenario in a fresh world and checks every job.
func runScenario(ctx context.Context, sc scenario, o Options, bins Binaries, dir string, rnd *rand.Rand, logf func(string, ...any)) (Row, error) {
	n, d := o.OtherJobs, o.OtherDuration
	if sc.big {
		n, d = o.Jobs, o.Duration
	}
	started := time.Now()
	logf("%s: starting nats-server, redis-server, simulator, receiver, %d ingress replicas behind a balancer, 2 chat and 2 search workers (%s)", sc.name, o.IngressReplicas, dir)
	r, err := startRig(ctx, dir, bins, o, logf)
	defer r.stop()
	if err != nil {
		return Row{}, err
	}
	cl := newClient(r.url, o.GiveUp)
	subs := make([]*submission, n)
	for i := range subs {
		subs[i] = newSubmission(o.Run, sc.name, i, r.recvURL, sc.research)
	}

	logf("%s: submitting %d jobs over %s while: %s", sc.name, n, d, sc.describe(o))
	r.phaseStart = time.Now()
	hurtDone := make(chan string, 1)
	hctx, stopHurt := context.WithCancel(ctx)
	defer stopHurt()
	go func() { hurtDone <- sc.hurt(hctx, r, rnd, o, d) }()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i, s := range subs {
		if !sleepUntil(ctx, r.phaseStart.Add(d*time.Duration(i)/time.Duration(n))) {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			cl.submit(ctx, s)
		}()
	}
	wg.Wait()
	what := <-hurtDone
	if ctx.Err() != nil {
		return Row{}, ctx.Err()
	}
	r.ensureUp()
	if err := r.waitReady(ctx, 30*time.Second); err != nil {
		return Row{}, err
	}

	// Settle: wait for every accepted job's terminal webhook (orphans of a wiped Redis
	// excepted), and in the restart scenarios until the last deadline has passed too.
	var wipeAt time.Time
	for _, in := range r.timeline() {
		if in.kind == "wipe" {
			wipeAt = in.at
		}
	}
	var last time.Time
	var waitFor []string
	for _, s := range subs {
		if !s.accepted() {
			continue
		}
		if s.acceptedAt.After(last) {
			last = s.acceptedAt
		}
		if sc.wipes && s.acceptedAt.Before(wipeAt.Add(time.Second)) {
			continue
		}
		waitFor = append(waitFor, s.jobID())
	}
	span := time.Duration(0)
	for _, w := range o.WebhookSchedule {
		span += w
	}
	bound := last.Add(o.JobTimeout + span + 20*time.Second)
	minEnd := time.Now()
	if sc.waitDeadline || sc.wipes {
		minEnd = last.Add(o.JobTimeout + 5*time.Second)
	}
	logf("%s: %s; waiting for %d terminal webhooks (at most until %s)", sc.name, what, len(waitFor), bound.Format("15:04:05"))
	for {
		missing := 0
		for _, id := range waitFor {
			if !r.recv.has(id) {
				missing++
			}
		}
		now := time.Now()
		if missing == 0 && now.After(minEnd) || now.After(bound) {
			break
		}
		if !sleep(ctx, time.Second) {
			return Row{}, ctx.Err()
		}
	}
	sleep(ctx, 2*time.Second) // late duplicates
	row, err := check(ctx, sc, r, cl, subs, wipeAt, what)
	row.Elapsed = time.Since(started).Round(time.Second)
	return row, err
}
