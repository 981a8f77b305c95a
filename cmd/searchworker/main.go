// Command searchworker runs web searches for searchfleet: one durable consumer per
// engine it serves, shared with every other search worker serving that engine.
//
//	searchworker --engines glm,brave    (or FLEET_ENGINES=glm,brave; default: all)
package main

import (
	"context"
	"flag"
	"strings"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/pkg/fleet"
)

func main() { cli.Main(run) }

func run(ctx context.Context) error {
	enginesFlag := flag.String("engines", "", "comma-separated engine ids to serve (default: FLEET_ENGINES, else all configured)")
	flag.Parse()
	env, file, log, err := cli.Load("searchworker")
	if err != nil {
		return err
	}
	if *enginesFlag != "" {
		env.Engines = strings.Split(*enginesFlag, ",")
	}
	rdb, err := cli.Redis(ctx, env.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	return fleet.Run(ctx, fleet.Options{Env: env, File: file, Roles: fleet.Roles{Search: true}, Redis: rdb, Log: log})
}
