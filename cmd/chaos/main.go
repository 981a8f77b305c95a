// Command chaos is the chaos suite (`make chaos`): it builds the fleet's binaries and
// nats-server, runs them as separate processes against their own nats-server and
// redis-server on loopback ports, hurts them scenario by scenario (ingress kills,
// worker kills, NATS and Redis kill -9 + restart, Redis restarted empty, the webhook
// receiver down) while clients submit jobs with Idempotency-Keys and callbacks, then
// checks every job and prints a table. It exits 1 when any job was lost, ended twice,
// or paid for twice without its caller dying; see docs/reliability.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
	}
	os.Exit(code)
}

func run(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "the smoke run: every scenario, small (about 3 minutes)")
	for _, a := range args {
		if a == "-quick" || a == "--quick" || a == "-quick=true" || a == "--quick=true" {
			*quick = true
		}
	}
	o := chaos.Defaults()
	if *quick {
		o = chaos.Quick()
	}
	fs.IntVar(&o.Jobs, "jobs", o.Jobs, "submissions of the ingress-kill scenario")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long the ingress-kill scenario submits")
	fs.IntVar(&o.IngressKills, "ingress-kills", o.IngressKills, "ingress kills in the ingress-kill scenario")
	fs.IntVar(&o.OtherJobs, "other-jobs", o.OtherJobs, "submissions of every other scenario")
	fs.DurationVar(&o.OtherDuration, "other-duration", o.OtherDuration, "how long every other scenario submits")
	fs.DurationVar(&o.ModelLatency, "model-latency", o.ModelLatency, "simulated main-model latency (plus up to half of it as jitter)")
	fs.DurationVar(&o.EngineLatency, "engine-latency", o.EngineLatency, "simulated engine latency")
	fs.DurationVar(&o.JobTimeout, "job-timeout", o.JobTimeout, "FLEET_JOB_TIMEOUT of the fleet")
	fs.DurationVar(&o.AckWait, "ack-wait", o.AckWait, "FLEET_ACK_WAIT of the fleet")
	fs.StringVar(&o.Dir, "dir", o.Dir, "where binaries, server data and process logs go (one directory per run)")
	fs.IntVar(&o.IngressReplicas, "ingress-replicas", o.IngressReplicas, "ingress processes behind the harness's balancer")
	fs.BoolVar(&o.Parallel, "parallel", o.Parallel, "run the scenarios at the same time, each in its own world (default in -quick)")
	fs.StringVar(&o.Run, "run", "", "name of this run: its directory under -dir and part of every key (default: from the clock)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed for victims and timings")
	scen := fs.String("scenarios", "", "comma-separated scenarios to run (default all: "+strings.Join(chaos.ScenarioNames(), ",")+")")
	if err := fs.Parse(args); err != nil {
		return 2, nil
	}
	if *scen != "" {
		o.Scenarios = strings.Split(*scen, ",")
	}
	start := time.Now()
	rows, bins, err := chaos.Run(ctx, o)
	if len(rows) > 0 {
		fmt.Printf("\nchaos run (%s; %s; %s; seed %d; %s)\n\n", map[bool]string{true: "quick", false: "default"}[*quick], bins.NATSVersion, "redis appendfsync always", o.Seed, time.Since(start).Round(time.Second))
		chaos.PrintTable(os.Stdout, rows)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return 130, errors.New("interrupted")
		}
		return 1, err
	}
	for _, r := range rows {
		if !r.OK() {
			return 1, errors.New("some jobs were lost, contradicted or paid for twice (see the table)")
		}
	}
	return 0, nil
}
