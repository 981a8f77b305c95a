package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/fleettest"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// Without any Redis (nothing at the local address, no redis-server on PATH), `make
// run` falls back to the in-process stand-in, and the whole fleet — its Lua scripts
// included — answers a question with citations on it.
func TestDevFallbackRunsTheFleet(t *testing.T) {
	t.Setenv("PATH", "")
	log := slog.New(slog.DiscardHandler)
	rdb, note, closeRedis, err := redisForDev(t.Context(), "", "redis://127.0.0.1:1/0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRedis()
	if !strings.Contains(note, "DEVELOPMENT ONLY") {
		t.Fatalf("fallback not labelled: %q", note)
	}
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	t.Setenv(demo.KeyEnv, "sim-key")
	env := fleettest.Settings()
	env.NATSURL = bustest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- fleet.Run(ctx, fleet.Options{Env: env, File: demo.Config(simURL, sim.EngineConfigs(simURL)),
			Roles: fleet.Roles{Ingress: true, Chat: true, Search: true}, Redis: rdb, Log: log, Listening: func(a string) { listening <- a }})
	}()
	defer func() { cancel(); <-done }()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("fleet did not start")
	}
	f := &fleettest.Fleet{URL: "http://" + addr}
	status, resp := f.Chat(t, "Search the web: what is the weather in San Francisco today?")
	if status != 200 || !strings.Contains(fleettest.Content(resp), "[1]") {
		t.Fatalf("status %d, answer %q", status, fleettest.Content(resp))
	}
}
