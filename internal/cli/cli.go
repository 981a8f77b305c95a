// Package cli is what every binary's main shares: a context cancelled by SIGINT or
// SIGTERM, configuration loading with a redacted log line, and the Redis connection.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
)

// Main runs run with a context cancelled on SIGINT/SIGTERM and exits 1 on error.
func Main(run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// Load reads the environment and the config file it names, logging both (redacted).
func Load(role string) (config.Env, *config.File, *slog.Logger, error) {
	env, err := config.LoadEnv()
	if err != nil {
		return env, nil, nil, err
	}
	log := env.Logger().With("process", role)
	if env.ConfigFile == "" {
		return env, nil, log, fmt.Errorf("FLEET_CONFIG must name the providers/models/webSearch config file (see config/example.json)")
	}
	f, err := config.LoadFile(env.ConfigFile)
	if err != nil {
		return env, nil, log, err
	}
	LogStart(log, env, f)
	return env, f, log, nil
}

// LogStart logs the settings once, redacted, and the secret variables the config
// file names (names only: config.LoadFile has resolved them all, or failed listing
// the missing ones).
func LogStart(log *slog.Logger, env config.Env, f *config.File) {
	log.Info("starting", "settings", env, "secret_vars", f.KeyEnvs())
}

// Redis connects to url, retrying until ctx ends or 30s pass.
func Redis(ctx context.Context, url string) (state.Client, error) {
	if url == "" {
		return nil, fmt.Errorf("REDIS_URL is required")
	}
	return state.Dial(ctx, url, 30*time.Second)
}

// RunRoles is the whole of a role binary: load the configuration, connect to Redis,
// run the roles until ctx ends. adjust, if set, may change the settings first (flags).
func RunRoles(ctx context.Context, process string, roles fleet.Roles, adjust func(*config.Env)) error {
	env, file, log, err := Load(process)
	if err != nil {
		return err
	}
	if adjust != nil {
		adjust(&env)
	}
	rdb, err := Redis(ctx, env.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	return fleet.Run(ctx, fleet.Options{Env: env, File: file, Roles: roles, Redis: rdb, Log: log})
}
