// Command chatworker runs true:the chat loop of searchfleet. Configuration: the environment (see the
// README's table) and the file FLEET_CONFIG names.
package main

import (
	"context"

	"github.com/searchfleet/searchfleet/internal/cli"
	"github.com/searchfleet/searchfleet/pkg/fleet"
)

func main() { cli.Main(run) }

func run(ctx context.Context) error {
	env, file, log, err := cli.Load("chatworker")
	if err != nil {
		return err
	}
	rdb, err := cli.Redis(ctx, env.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	return fleet.Run(ctx, fleet.Options{Env: env, File: file, Roles: fleet.Roles{Chat: true}, Redis: rdb, Log: log})
}
