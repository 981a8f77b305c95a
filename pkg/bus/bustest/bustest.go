// Package bustest starts a real NATS JetStream server for a test: embedded, on a free
// port, storing into t.TempDir(), shut down when the test ends.
package bustest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// Server starts an embedded JetStream server for t and returns its URL.
func Server(t testing.TB) string {
	t.Helper()
	e, err := bus.RunEmbedded("127.0.0.1", -1, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e.URL()
}

// Connect connects to url with the fleet's streams in place (memory storage unless
// file storage is asked for, so tests stay fast) and closes the connection when t ends.
// opts are the connection's options (bus.WithNamespace).
func Connect(t testing.TB, url string, opts ...bus.Option) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, url, t.Name(), slog.New(slog.DiscardHandler), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.RawConn().Close() })
	if err := b.EnsureStreams(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	return b
}

// New is Server followed by Connect.
func New(t testing.TB) (*bus.Bus, string) {
	url := Server(t)
	return Connect(t, url), url
}
