// Command ingress runs the HTTP API of searchfleet. Configuration: the environment (see the
// README's table) and the file FLEET_CONFIG names.
package main

import (
	"context"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/pkg/fleet"
)

func main() {
	cli.Main(func(ctx context.Context) error {
		return cli.RunRoles(ctx, "ingress", fleet.Roles{Ingress: true}, nil)
	})
}
