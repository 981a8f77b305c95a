package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
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
	env := fleettest.Settings()
	env.NATSURL = bustest.Server(t)
	url, _ := fleettest.Run(t, env, demo.Config(simURL, sim.EngineConfigs(simURL)), rdb)
	f := &fleettest.Fleet{URL: url}
	// The banner's question: the simulated search is about it, and the answer quotes it.
	status, resp := f.Chat(t, "Search the web: who won the 2022 world cup?")
	if status != 200 || !strings.Contains(fleettest.Content(resp), "[1]") || !strings.Contains(fleettest.Content(resp), "who won the 2022 world cup, simulated result 1 of 5.") {
		t.Fatalf("status %d, answer %q", status, fleettest.Content(resp))
	}
}
