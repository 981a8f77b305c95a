// Command fleet runs the whole of searchfleet in one process — ingress, chat worker,
// search workers — on an embedded NATS JetStream server and, unless FLEET_CONFIG names
// a config file, the built-in provider simulator: `make run`, with nothing to set up
// and no keys. Redis comes from REDIS_URL, else a local redis-server if one answers or
// can be started, else an in-process stand-in that is for development only.
//
// With -demo (`make demo`) the built-in configuration also has two tenants with API
// keys, a small search budget and signed webhooks to a receiver in the same process:
// the banner prints the keys and examples that work as printed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
)

func main() { cli.Main(run) }

func run(ctx context.Context) error {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	demoTenants := fs.Bool("demo", false, "add the demo tenants (keys, budgets, signed webhooks to a local receiver) to the built-in simulator's configuration")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	env, err := config.LoadEnv()
	if err != nil {
		return err
	}
	log := env.Logger().With("process", "fleet")

	natsNote := "NATS_URL " + redact.URL(env.NATSURL)
	var embedded *bus.Embedded
	if _, set := os.LookupEnv("NATS_URL"); !set {
		dir := filepath.Join(env.DataDir, "nats")
		embedded, err = bus.RunEmbedded("127.0.0.1", -1, dir)
		if err != nil {
			return err
		}
		defer embedded.Shutdown()
		env.NATSURL = embedded.URL()
		natsNote = "embedded JetStream server at " + env.NATSURL + ", data in " + dir
	}

	var file *config.File
	simNote, demoNote := "", ""
	if env.ConfigFile != "" {
		if file, err = config.LoadFile(env.ConfigFile); err != nil {
			return err
		}
	} else {
		sim := simulator.New(simulator.Options{})
		hs, url, err := sim.Listen("127.0.0.1:0")
		if err != nil {
			return err
		}
		defer hs.Close()
		file = demo.Config(url, sim.EngineConfigs(url)) // resolved: no keys needed
		if *demoTenants {
			demo.AddTenants(file)
			env.WebhookAllow = append(env.WebhookAllow, "127.0.0.0/8") // the receiver below
			receiverURL, closeReceiver, err := demo.Receiver(demo.AliceWebhookSecret, log)
			if err != nil {
				return err
			}
			defer closeReceiver()
			demoNote = receiverURL
		}
		if err := file.Validate(); err != nil {
			return fmt.Errorf("demo config: %w", err)
		}
		simNote = url
	}
	cli.LogStart(log, env, file)

	rdb, redisNote, closeRedis, err := redisForDev(ctx, env.RedisURL, "redis://127.0.0.1:6379/0", log)
	if err != nil {
		return err
	}
	defer closeRedis()

	return fleet.Run(ctx, fleet.Options{
		Env: env, File: file, Roles: fleet.Roles{Ingress: true, Chat: true, Search: true}, Redis: rdb, Log: log, Embedded: embedded,
		Listening: func(addr string) { banner(os.Stdout, addr, natsNote, redisNote, simNote, demoNote, file) },
	})
}

// banner prints where the fleet is and examples that work as printed: with tenants
// configured they carry a key (the demo's own, or a placeholder for the operator's).
func banner(w io.Writer, addr, natsNote, redisNote, simNote, demoNote string, file *config.File) {
	base := "http://" + addr
	model := demo.Model
	if names := file.ModelNames(); len(names) > 0 && simNote == "" {
		model = names[0]
	}
	fmt.Fprintf(w, `
searchfleet is running: ingress, chat worker and search workers in one process.
  API        %s   (console: %[1]s/console, MCP: %[1]s/mcp)
  NATS       %s
  Redis      %s
`, base, natsNote, redisNote)
	if simNote != "" {
		fmt.Fprintf(w, "  Providers  SIMULATED by the built-in simulator at %s (no keys needed)\n", simNote)
	}
	auth := ""
	switch {
	case demoNote != "":
		auth = " -H 'Authorization: Bearer " + demo.AliceKey + "'"
		fmt.Fprintf(w, `  Tenants    alice (key %s, signed webhooks, 50 searches a day)
             bob   (key %s, %d searches a day: ask more to see the budget refuse)
  Webhooks   a receiver at %s verifies and logs every delivery
`, demo.AliceKey, demo.BobKey, demo.BobSearchesPerDay, demoNote)
	case len(file.Tenants) > 0:
		auth = " -H \"Authorization: Bearer $API_KEY\""
		fmt.Fprintf(w, "  Tenants    %d configured: set API_KEY to one of their keys for the examples below\n", len(file.Tenants))
	}
	fmt.Fprintf(w, `
Ask a question that needs the web:

  curl -s %[1]s/v1/chat/completions -H 'Content-Type: application/json'%[3]s \
    -d '{"model":"%[2]s","messages":[{"role":"user","content":"Search the web: who won the 2022 world cup?"}]}'

Or submit it as a job and follow its events:

  curl -s %[1]s/v1/jobs -H 'Content-Type: application/json'%[3]s \
    -d '{"model":"%[2]s","messages":[{"role":"user","content":"Find the latest news about AI"}]}'
  curl -sN%[3]s %[1]s/v1/jobs/<id>/events
`, base, model, auth)
	if demoNote != "" {
		fmt.Fprintf(w, `
As alice, with a signed webhook to the demo receiver (watch this log), then her spend:

  curl -s %[1]s/v1/jobs -H 'Content-Type: application/json'%[3]s \
    -d '{"model":"%[2]s","messages":[{"role":"user","content":"Search the web for NATS JetStream news"}],"callback":{"url":"%[4]s"}}'
  curl -s%[3]s %[1]s/v1/usage

As bob, until his budget of %[5]d searches a day answers 429:

  curl -s %[1]s/v1/chat/completions -H 'Content-Type: application/json' -H 'Authorization: Bearer %[6]s' \
    -d '{"model":"%[2]s","messages":[{"role":"user","content":"Search the web: latest Go release?"}]}'
`, base, model, auth, demoNote, demo.BobSearchesPerDay, demo.BobKey)
	}
	fmt.Fprintln(w)
}

// redisForDev returns REDIS_URL's Redis, else the one at local if it answers, else a
// redis-server it starts, else an in-process stand-in.
func redisForDev(ctx context.Context, url, local string, log *slog.Logger) (state.Client, string, func(), error) {
	if url != "" {
		rdb, err := cli.Redis(ctx, url)
		if err != nil {
			return nil, "", nil, err
		}
		return rdb, redact.URL(url), func() { rdb.Close() }, nil
	}
	if rdb := ping(local); rdb != nil {
		return rdb, local + " (found running locally)", func() { rdb.Close() }, nil
	}
	if path, err := exec.LookPath("redis-server"); err == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
			if err := cmd.Start(); err == nil {
				u := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
				for i := 0; i < 50; i++ {
					if rdb := ping(u); rdb != nil {
						return rdb, u + " (started for this run)", func() { rdb.Close(); cmd.Process.Kill(); cmd.Wait() }, nil
					}
					time.Sleep(100 * time.Millisecond)
				}
				cmd.Process.Kill()
				cmd.Wait()
			}
		}
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, "", nil, err
	}
	log.Warn("NO REDIS FOUND: using an in-process Redis stand-in (miniredis). It is for DEVELOPMENT ONLY: state is lost on exit and cannot be shared with other processes. Set REDIS_URL for anything else.")
	rdb, err := state.Dial(ctx, "redis://"+mr.Addr(), 0)
	if err != nil {
		mr.Close()
		return nil, "", nil, err
	}
	return rdb, "in-process stand-in (DEVELOPMENT ONLY, set REDIS_URL)", func() { rdb.Close(); mr.Close() }, nil
}

func ping(url string) state.Client {
	rdb, err := state.Dial(context.Background(), url, 0)
	if err != nil {
		return nil
	}
	return rdb
}
