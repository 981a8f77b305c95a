// Command chatworker runs the chat loop of searchfleet. Configuration: the environment (see the
// README's table) and the file FLEET_CONFIG names.
package main

import (
	"context"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/pkg/fleet"
)

func main() {
	cli.Main(func(ctx context.Context) error {
		return cli.RunRoles(ctx, "chatworker", fleet.Roles{Chat: true}, nil)
	})
}
