package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the programs a run starts.
type Binaries struct {
	Dir                                  string
	Ingress, ChatWorker, SearchWorker    string
	NATSServer, RedisServer, NATSVersion string
}

// Build compiles the fleet's role binaries and nats-server into dir, from the module
// in the current directory. nats-server is built from the nats-server/v2 module
// version go.mod pins — the one the fleet embeds — not taken from PATH, where a
// distribution's package is years older. redis-server comes from PATH.
func Build(ctx context.Context, dir string) (Binaries, error) {
	b := Binaries{Dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, err
	}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := run("go", "build", "-o", dir+"/", "./cmd/ingress", "./cmd/chatworker", "./cmd/searchworker"); err != nil {
		return b, err
	}
	b.NATSServer = filepath.Join(dir, "nats-server")
	if _, err := run("go", "build", "-o", b.NATSServer, "github.com/nats-io/nats-server/v2"); err != nil {
		return b, err
	}
	v, err := run(b.NATSServer, "--version")
	if err != nil {
		return b, err
	}
	b.NATSVersion = v
	b.Ingress, b.ChatWorker, b.SearchWorker = filepath.Join(dir, "ingress"), filepath.Join(dir, "chatworker"), filepath.Join(dir, "searchworker")
	if b.RedisServer, err = exec.LookPath("redis-server"); err != nil {
		return b, fmt.Errorf("redis-server is not on PATH (apt-get install redis-server): %w", err)
	}
	return b, nil
}
