// Command searchworker runs web searches for searchfleet: one durable consumer per
// engine it serves, shared with every other search worker serving that engine, and
// the web_fetch consumer (pages read through the SSRF guard) shared by all of them.
//
//	searchworker --engines glm,brave    (or FLEET_ENGINES=glm,brave; default: all)
package main

import (
	"context"
	"flag"
	"strings"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
)

func main() {
	engines := flag.String("engines", "", "comma-separated engine ids to serve (default: FLEET_ENGINES, else all configured)")
	flag.Parse()
	cli.Main(func(ctx context.Context) error {
		return cli.RunRoles(ctx, "searchworker", fleet.Roles{Search: true}, func(e *config.Env) {
			if *engines != "" {
				e.Engines = strings.Split(*engines, ",")
			}
		})
	})
}
