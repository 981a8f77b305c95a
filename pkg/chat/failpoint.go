package chat

import (
	"fmt"
	"os"
)

// ExitAt returns a Worker.Failpoint that exits the process with status 3 when a step
// reaches the named point, or nil for "" (production). The crash tests set
// FLEET_FAILPOINT on a chatworker to kill it exactly between two writes of a step.
func ExitAt(point string) func(name string) {
	if point == "" {
		return nil
	}
	return func(name string) {
		if name == point {
			fmt.Fprintf(os.Stderr, "FAILPOINT %s: exiting\n", name)
			os.Exit(3)
		}
	}
}
