// Command simulator runs the provider simulator as its own process (benchmarks, and
// fleets of separate binaries in development): a scripted OpenAI-compatible main
// model at /v1 and every engine kind's wire format under /<kind>/, all SIMULATED.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

func main() { cli.Main(run) }

func run(ctx context.Context) error {
	addr := flag.String("addr", "127.0.0.1:9900", "listen address")
	modelLatency := flag.Duration("model-latency", 0, "latency added to every main-model answer")
	engineLatency := flag.Duration("engine-latency", 0, "latency added to every engine answer")
	modelMax := flag.Duration("model-latency-max", 0, "with it above -model-latency, each model answer waits between the two (drawn from the request)")
	engineMax := flag.Duration("engine-latency-max", 0, "with it above -engine-latency, each engine answer waits between the two (drawn from the request)")
	printConfig := flag.Bool("print-config", false, "print a fleet config file for this simulator and exit")
	flag.Parse()
	sim := simulator.New(simulator.Options{ModelLatency: *modelLatency, EngineLatency: *engineLatency, ModelLatencyMax: *modelMax, EngineLatencyMax: *engineMax})
	base := "http://" + *addr
	if *printConfig {
		b, _ := json.MarshalIndent(demo.Config(base, sim.EngineConfigs(base)), "", "  ")
		os.Stdout.Write(append(b, '\n'))
		return nil
	}
	srv := &http.Server{Addr: *addr, Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(os.Stderr, "provider SIMULATOR listening on %s (model latency %s, engine latency %s)\n", base, *modelLatency, *engineLatency)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}
