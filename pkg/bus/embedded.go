package bus

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Embedded runs a NATS server with JetStream inside this process: the zero-setup
// default of `make run`, and the server every bus test starts for itself.
type Embedded struct {
	srv *server.Server
}

// RunEmbedded starts an embedded server storing JetStream data in storeDir, listening
// on host:port (port -1 picks a free one).
func RunEmbedded(host string, port int, storeDir string) (*Embedded, error) {
	opts := &server.Options{
		ServerName: "searchfleet-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   storeDir,
		NoSigs:     true,
		NoLog:      true,
		// Big enough for the work queues of a few development fleets (namespaces): an
		// accounting limit, what the streams reserve; the disk holds what they store.
		JetStreamMaxMemory: 1 << 30,
		JetStreamMaxStore:  64 << 30,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after 10s")
	}
	return &Embedded{srv: srv}, nil
}

// URL is the server's client URL.
func (e *Embedded) URL() string { return e.srv.ClientURL() }

// Connect connects to the embedded server in process, with no socket between: what
// the all-in-one process uses (separate processes connect to URL over TCP).
func (e *Embedded) Connect(ctx context.Context, name string, log *slog.Logger, opts ...Option) (*Bus, error) {
	return connect(ctx, e.URL(), name, log, opts, []nats.Option{nats.InProcessServer(e.srv)})
}

// Shutdown stops the server and waits for it.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
