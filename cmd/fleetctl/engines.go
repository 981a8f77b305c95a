package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginecheck"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
)

// enginesCheck runs the contract check of every configured engine and main model:
// one search (one short call) each, against its provider with its configured key (the
// fleet's config file, --config or FLEET_CONFIG, its secrets from the environment), or
// with --offline against the recorded fixtures (every engine kind and model protocol,
// when no config file is given). It prints one line per engine and model (--json: the
// reports) and fails when one is unreachable, its key refused, its answer unread or
// its endpoint gone (404/410).
func (a *app) enginesCheck(ctx context.Context, args []string) error {
	fs := a.flags("engines check")
	path := fs.String("config", os.Getenv("FLEET_CONFIG"), "the fleet's config file (FLEET_CONFIG)")
	offline := fs.Bool("offline", false, "check against the recorded fixtures, not the providers")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on each engine's search and each model's call")
	if _, err := exactly(fs, args, 0, "no arguments"); err != nil {
		return err
	}
	cfgs, models, err := checkConfigs(*path, *offline)
	if err != nil {
		return err
	}
	var checks []func(context.Context) enginecheck.Report
	for _, c := range cfgs {
		checks = append(checks, func(ctx context.Context) enginecheck.Report {
			if *offline {
				return enginecheck.CheckOffline(ctx, c)
			}
			return enginecheck.Check(ctx, c, &http.Client{})
		})
	}
	for _, m := range models {
		checks = append(checks, func(ctx context.Context) enginecheck.Report {
			if *offline {
				return enginecheck.CheckModelOffline(ctx, m)
			}
			return enginecheck.CheckModel(ctx, m, &http.Client{})
		})
	}
	var reports []enginecheck.Report
	failed := 0
	for _, check := range checks {
		cctx, cancel := context.WithTimeout(ctx, *timeout)
		rep := check(cctx)
		cancel()
		if rep.Failed() {
			failed++
		}
		reports = append(reports, rep)
		if !*asJSON {
			fmt.Fprintln(a.stdout, rep.Summary())
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(reports, "", "  ")
		fmt.Fprintln(a.stdout, string(b))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d engine(s) and model(s) failed the contract check", failed, len(checks))
	}
	return nil
}

// checkConfigs are the engines and models to check: the config file's, or offline
// without one, one engine of every kind and one model of every protocol.
func checkConfigs(path string, offline bool) ([]engines.Config, []enginecheck.Model, error) {
	if path == "" {
		if !offline {
			return nil, nil, fmt.Errorf("engines check needs the fleet's config file (--config or FLEET_CONFIG), or --offline")
		}
		var out []engines.Config
		for _, k := range engines.Kinds() {
			c := engines.Config{ID: k, Kind: k}
			if k == "cloudflare" {
				c.Options = json.RawMessage(`{"accountId":"offline-check"}`)
			}
			out = append(out, c)
		}
		var models []enginecheck.Model
		for _, p := range upstream.ModelProtocols {
			models = append(models, enginecheck.Model{Name: p, Provider: p, Protocol: p, Model: "offline-check"})
		}
		return out, models, nil
	}
	var f *config.File
	var err error
	if offline {
		// Offline no key is sent: every variable the file names reads as set.
		var b []byte
		if b, err = os.ReadFile(path); err == nil {
			if f, err = config.ParseFile(b); err == nil {
				err = f.Resolve(func(string) (string, bool) { return "offline-check", true })
			}
		}
	} else {
		f, err = config.LoadFile(path)
	}
	if err != nil {
		return nil, nil, err
	}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		return nil, nil, err
	}
	var models []enginecheck.Model
	for _, name := range slices.Sorted(maps.Keys(f.Models)) {
		m := f.Models[name]
		p := f.Providers[m.Provider]
		models = append(models, enginecheck.Model{Name: name, Provider: m.Provider, Protocol: p.Protocol, BaseURL: p.BaseURL, APIKey: p.APIKey, Model: m.Model})
	}
	return slices.Clip(cfgs), models, nil
}
