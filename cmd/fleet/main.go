// Command fleet runs the whole of searchfleet in one process — ingress, chat worker,
// search workers — on an embedded NATS JetStream server and, unless FLEET_CONFIG names
// a config file, the built-in provider simulator: `make run`, with nothing to set up
// and no keys. Redis comes from REDIS_URL, else a local redis-server if one answers or
// can be started, else an in-process stand-in that is for development only.
package main

import (
	"context"
	"fmt"
	"github.com/searchfleet/searchfleet/internal/redact"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/searchfleet/searchfleet/pkg/state"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

func main() { cli.Main(run) }

func run(ctx context.Context) error {
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
	simNote := ""
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
		Listening: func(addr string) { banner(addr, natsNote, redisNote, simNote, file) },
	})
}

func banner(addr, natsNote, redisNote, simNote string, file *config.File) {
	base := "http://" + addr
	model := demo.Model
	if names := file.ModelNames(); len(names) > 0 && simNote == "" {
		model = names[0]
	}
	fmt.Printf(`
searchfleet is running: ingress, chat worker and search workers in one process.
  API        %s
  NATS       %s
  Redis      %s
`, base, natsNote, redisNote)
	if simNote != "" {
		fmt.Printf("  Providers  SIMULATED by the built-in simulator at %s (no keys needed)\n", simNote)
	}
	fmt.Printf(`
Ask a question that needs the web:

  curl -s %[1]s/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"%[2]s","messages":[{"role":"user","content":"Search the web: what is the weather in San Francisco today?"}]}'

Or submit it as a job and follow its events:

  curl -s %[1]s/v1/jobs -H 'Content-Type: application/json' \
    -d '{"model":"%[2]s","messages":[{"role":"user","content":"Find the latest news about AI"}]}'
  curl -sN %[1]s/v1/jobs/<id>/events

`, base, model)
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
