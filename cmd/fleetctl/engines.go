package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginecheck"
)

// enginesCheck runs the contract check of every configured engine: one search each,
// against its provider with its configured key (the fleet's config file, --config or
// FLEET_CONFIG, its secrets from the environment), or with --offline against the
// recorded fixtures (every kind, when no config file is given). It prints one line
// per engine (--json: the reports) and fails when an engine is unreachable, its key
// refused, its answer unread or its endpoint gone (404/410).
func (a *app) enginesCheck(ctx context.Context, args []string) error {
	fs := a.flags("engines check")
	path := fs.String("config", os.Getenv("FLEET_CONFIG"), "the fleet's config file (FLEET_CONFIG)")
	offline := fs.Bool("offline", false, "check against the recorded fixtures, not the providers")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on each engine's search")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 0, "no arguments"); err != nil {
		return err
	}
	cfgs, err := checkConfigs(*path, *offline)
	if err != nil {
		return err
	}
	var reports []enginecheck.Report
	failed := 0
	for _, c := range cfgs {
		cctx, cancel := context.WithTimeout(ctx, *timeout)
		var rep enginecheck.Report
		if *offline {
			rep = enginecheck.CheckOffline(cctx, c)
		} else {
			rep = enginecheck.Check(cctx, c, &http.Client{})
		}
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
		return fmt.Errorf("%d of %d engine(s) failed the contract check", failed, len(cfgs))
	}
	return nil
}

// checkConfigs are the engines to check: the config file's, or offline without one,
// one engine of every kind.
func checkConfigs(path string, offline bool) ([]engines.Config, error) {
	if path == "" {
		if !offline {
			return nil, fmt.Errorf("engines check needs the fleet's config file (--config or FLEET_CONFIG), or --offline")
		}
		var out []engines.Config
		for _, k := range engines.Kinds() {
			c := engines.Config{ID: k, Kind: k}
			if k == "cloudflare" {
				c.Options = json.RawMessage(`{"accountId":"offline-check"}`)
			}
			out = append(out, c)
		}
		return out, nil
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
		return nil, err
	}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		return nil, err
	}
	return slices.Clip(cfgs), nil
}
