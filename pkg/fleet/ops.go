package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/metrics"
)

// runOps starts the internal listener (FLEET_METRICS_ADDR: /metrics, /healthz,
// /readyz) once NATS and Redis are open, and registers the queue metrics. It returns
// a stop function; with no address set it serves nothing.
func (p *process) runOps() (stop func(), err error) {
	p.o.Metrics.WatchQueues(&queueReader{p: p}, 3*time.Second)
	if p.env.MetricsAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", p.env.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("FLEET_METRICS_ADDR %s: %w", p.env.MetricsAddr, err)
	}
	ops := &ingress.Ops{Bus: p.bus, Store: p.store, Metrics: p.o.Metrics, Log: p.log.With("role", "ops")}
	h := ops.Handler()
	if p.env.Pprof {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		h = mux
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("metrics listener stopped", "err", err)
		}
	}()
	p.log.Info("metrics, health and readiness listening", "addr", ln.Addr().String())
	if p.o.MetricsListening != nil {
		p.o.MetricsListening(ln.Addr().String())
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}

// started records a consumer this process reads, for its lag metrics.
func (p *process) started(spec bus.ConsumerSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.specs = append(p.specs, spec)
}

// queueReader reads the queue metrics at a scrape: the backlogs of this process's
// consumers, and the fleet-wide figures (DLQ depth, oldest queued job, unfinished
// jobs and the nearest deadline) every process reports alike.
type queueReader struct{ p *process }

func (r *queueReader) ReadQueues(ctx context.Context) metrics.Queues {
	p := r.p
	q := metrics.Queues{Up: true, OldestQueued: map[string]time.Time{}}
	fail := func(what string, err error) {
		q.Up = false
		p.log.Debug("queue metrics: reading "+what, "err", err)
	}
	p.mu.Lock()
	specs := append([]bus.ConsumerSpec(nil), p.specs...)
	p.mu.Unlock()
	for _, s := range specs {
		lag, err := p.bus.FamilyLag(ctx, s.Stream, s.Config.Durable) // with its lanes
		if err != nil {
			fail("consumer lag", err)
			continue
		}
		q.Consumers = append(q.Consumers, metrics.ConsumerLag{Stream: s.Stream, Consumer: s.Config.Durable, Pending: lag.Pending, AckPending: lag.AckPending})
	}
	var err error
	if q.DLQMessages, err = p.bus.StreamMessages(ctx, bus.StreamDLQ); err != nil {
		fail("dlq depth", err)
	}
	for queue, subjects := range map[string][]string{
		"chat":  {bus.SubjectChatJob, bus.SubjectJobsOf(bus.BandSync), bus.SubjectJobsOf(bus.BandAsync)},
		"batch": {bus.SubjectJobsOf(bus.BandBatch)},
	} {
		for _, subject := range subjects {
			at, ok, err := p.bus.OldestMessage(ctx, bus.StreamJobs, subject)
			if err != nil {
				fail("oldest job", err)
			} else if ok && (q.OldestQueued[queue].IsZero() || at.Before(q.OldestQueued[queue])) {
				q.OldestQueued[queue] = at
			}
		}
	}
	if q.Unfinished, q.NextDeadline, err = p.store.Jobs.Unfinished(ctx); err != nil {
		fail("unfinished jobs", err)
	}
	return q
}
