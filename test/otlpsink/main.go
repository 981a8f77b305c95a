// Command otlpsink is a real OTLP receiver for the tracing tests: the OpenTelemetry
// Collector's own otlpreceiver (gRPC and HTTP/protobuf), whose traces are written to
// stdout as one line of OTLP JSON per export. It lives in a module of its own, so the
// collector's dependencies stay out of the fleet's go.mod; scripts/ensure-otlpsink.sh
// builds it at the pinned version.
//
//	otlpsink -grpc 127.0.0.1:0 -http 127.0.0.1:0
//
// It prints "grpc <addr>" and "http <addr>" on stderr once it listens (the ports it
// was given, or the ones it picked for 0), then "spans <json>" lines on stdout, and
// exits on SIGINT, SIGTERM or when its stdin closes.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func main() {
	grpcAddr := flag.String("grpc", "127.0.0.1:0", "gRPC listen address")
	httpAddr := flag.String("http", "127.0.0.1:0", "HTTP listen address")
	flag.BoolVar(&quiet, "quiet", false, "count the spans instead of writing them (for benchmarks): \"spans received N\" on stderr at exit")
	flag.Parse()
	if err := run(*grpcAddr, *httpAddr); err != nil {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
}

// freeAddr resolves a ":0" address to a port free now, so the receiver (which takes
// an address, not a listener) can be told it and the caller learns it.
func freeAddr(addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

var quiet bool

func run(grpcAddr, httpAddr string) error {
	var err error
	if grpcAddr, err = freeAddr(grpcAddr); err != nil {
		return err
	}
	if httpAddr, err = freeAddr(httpAddr); err != nil {
		return err
	}
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = grpcAddr
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = httpAddr

	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var m ptrace.JSONMarshaler
	var received atomic.Int64
	defer func() {
		if quiet {
			fmt.Fprintf(os.Stderr, "spans received %d\n", received.Load())
		}
	}()
	next, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		if quiet {
			received.Add(int64(td.SpanCount()))
			return nil
		}
		b, err := m.MarshalTraces(td)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "spans %s\n", b)
		return out.Flush()
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	r, err := f.CreateTraces(ctx, receivertest.NewNopSettings(f.Type()), cfg, next)
	if err != nil {
		return err
	}
	if err := r.Start(ctx, componentHost{}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "grpc %s\nhttp %s\n", grpcAddr, httpAddr)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).WriteTo(discard{})
		close(eof)
	}()
	select {
	case <-stop:
	case <-eof:
	}
	return r.Shutdown(ctx)
}

type componentHost struct{}

func (componentHost) GetExtensions() map[component.ID]component.Component { return nil }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
