// Package fleet wires the fleet's roles — ingress, chat worker, search worker — from
// configuration. Each cmd/ binary runs one role through Run; the all-in-one process
// and the end-to-end tests run all three in one process the same way.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/provider"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/trace"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// Roles selects what a process does.
type Roles struct {
	Ingress bool
	Chat    bool
	Search  bool
}

// service is the service.name of a process running roles (OTEL_SERVICE_NAME wins).
func (r Roles) service() string {
	switch r {
	case Roles{Ingress: true}:
		return "searchfleet-ingress"
	case Roles{Chat: true}:
		return "searchfleet-chatworker"
	case Roles{Search: true}:
		return "searchfleet-searchworker"
	}
	return "searchfleet"
}

// Options configure Run.
type Options struct {
	Env   config.Env
	File  *config.File
	Roles Roles
	Redis state.Client
	Log   *slog.Logger
	// Metrics defaults to a new registry.
	Metrics *metrics.Metrics
	// HTTPClient reaches models and engines; nil means a tuned default (a client of its own
	// for the models).
	HTTPClient *http.Client
	// Listening, if set, is called with ingress's address once it accepts requests.
	Listening func(addr string)
	// MetricsListening, if set, is called with the internal listener's address
	// (FLEET_METRICS_ADDR) once it serves.
	MetricsListening func(addr string)
	// Memory keeps the streams in memory (benchmarks); file storage otherwise.
	Memory bool
	// Embedded, if set, is a NATS server in this process: the fleet connects to it
	// without a socket instead of dialling Env.NATSURL.
	Embedded *bus.Embedded
	// Failpoint, if set, is called at the chat and research workers' (and the research
	// API's) named points in place of FLEET_FAILPOINT's exit: an in-process crash test panics there, and the
	// step is redelivered as a dead worker's is.
	Failpoint func(name string)
}

// Run runs the selected roles until ctx ends, then drains: ingress stops accepting,
// consumers finish their in-flight messages (bounded by DrainTimeout), and only then
// does Run return, so the caller can close Redis.
func Run(ctx context.Context, o Options) error {
	stopTrace, err := trace.Setup(ctx, o.Roles.service())
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTrace(sctx); err != nil {
			o.Log.Warn("fleet: flushing spans", "err", err)
		}
	}()
	p, err := open(ctx, o)
	if err != nil {
		return err
	}
	defer p.bus.Close()
	// Every way out drains what was started: a SIGTERM that lands while later
	// consumers are still being set up must not drop the steps the first ones took.
	defer p.drain()
	stopOps, err := p.runOps()
	if err != nil {
		return err
	}
	defer stopOps()

	if o.Roles.Chat {
		if err := p.runChat(ctx); err != nil {
			return err
		}
	}
	if o.Roles.Search {
		if err := p.runSearch(ctx); err != nil {
			return err
		}
	}
	var srv *http.Server
	errc := make(chan error, 1)
	if o.Roles.Ingress {
		if srv, err = p.runIngress(ctx, errc); err != nil {
			return err
		}
	}

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("ingress stopped", "err", err)
		}
	}
	p.log.Info("shutting down: draining")
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), p.env.DrainTimeout)
		srv.Shutdown(sctx)
		cancel()
	}
	return nil
}

// process is one fleet process: its connections, what every role shares, and the
// consumers it started (drained on the way out).
type process struct {
	o        Options
	records  *bus.Records // the records bucket
	env      config.Env
	log      *slog.Logger
	id       string
	hc       *http.Client
	modelHC  *http.Client // the main models'
	bus      *bus.Bus
	store    *state.Store
	engines  *engines.Registry
	tools    *intent.Toolset
	classify *intent.Classifier
	// ender ends jobs in every role; hooks and batches are run from terminal events
	// by the ingress role's finisher, and also validate callbacks and batches there.
	ender   *jobs.Ender
	hooks   *webhook.Service
	batches *batch.Service

	workers []*bus.Worker
	stops   []func()
	drained bool

	mu    sync.Mutex
	specs []bus.ConsumerSpec // the consumers started, for their lag metrics (ops.go)
}

// processes counts the fleet processes this OS process has opened, to name each apart.
var processes atomic.Int64

// open connects to NATS and Redis and builds what the roles share.
func open(ctx context.Context, o Options) (*process, error) {
	p := &process{o: o, env: o.Env, log: o.Log, hc: o.HTTPClient}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.o.Metrics == nil {
		p.o.Metrics = metrics.New()
	}
	p.modelHC = p.hc
	if p.hc == nil {
		p.hc = &http.Client{Transport: Transport()}
		p.modelHC = &http.Client{Transport: Transport()} // no Timeout: each call's context bounds it (FLEET_MODEL_TIMEOUT)
	}
	host, _ := os.Hostname()
	p.id = fmt.Sprintf("%s-%d", host, os.Getpid())
	if n := processes.Add(1); n > 1 {
		// A second fleet in the same OS process (tests run several) is another
		// worker: leases and claims must tell them apart.
		p.id += "-" + strconv.FormatInt(n, 10)
	}
	var err error
	if o.Embedded != nil {
		p.bus, err = o.Embedded.Connect(ctx, "searchfleet-"+p.id, p.log, bus.WithNamespace(p.env.Namespace))
	} else {
		p.bus, err = bus.Connect(ctx, p.env.NATSURL, "searchfleet-"+p.id, p.log, bus.WithNamespace(p.env.Namespace))
	}
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*process, error) { p.bus.Close(); return nil, err }
	if err := p.bus.EnsureStreams(ctx, bus.Limits{Replicas: p.env.NATSReplicas, EventsMaxBytes: p.env.EventsMaxBytes, Memory: o.Memory}); err != nil {
		return fail(fmt.Errorf("nats streams: %w", err))
	}
	// Ended jobs' records live on JetStream (the records bucket), not in Redis.
	records, err := bus.OpenRecords(ctx, p.bus, p.env.Retention, p.env.RecordsMaxBytes)
	if err != nil {
		return fail(err)
	}
	p.records = records
	warnRecordsBound(p.log, p.env.RecordsMaxBytes, config.NewTenantLimits(p.env.TenantLimits, o.File.Tenants))
	p.store = state.New(o.Redis, state.NamespacePrefix(p.env.Namespace, p.env.KeyPrefix), p.env.Retention, state.WithArchive(records))
	if err := p.store.LoadScripts(ctx); err != nil {
		return fail(err)
	}
	cfgs, err := o.File.EngineConfigs()
	if err != nil {
		return fail(err)
	}
	// Key cooldowns live in Redis: a key one search worker saw refused rests for all
	// (within cooldownFresh: each process asks at most that often per key).
	cool := countedCooldowns{Cooldowns: provider.Cached(p.store.Searches, cooldownFresh), rests: p.o.Metrics.KeyCooldowns}
	if p.engines, err = engines.FromConfigWith(cfgs, p.hc, engines.Options{Cooldowns: cool, Log: p.log.With("role", "search"),
		Deprecation: func(engine, signal string) { p.o.Metrics.ProviderDeprecation.WithLabelValues(engine, signal).Inc() }}); err != nil {
		return fail(err)
	}
	if p.tools, p.classify, err = intentOf(o.File); err != nil {
		return fail(err)
	}
	p.ender = jobs.NewEnder(p.store.Jobs, p.bus, p.o.Metrics, p.log)
	if p.hooks, err = webhooksOf(p.env, o.File, p.bus, p.store, p.log, p.o.Metrics); err != nil {
		return fail(err)
	}
	p.batches = &batch.Service{Bus: p.bus, Store: batch.StoreOf(p.store), Webhooks: p.hooks, Ender: p.ender, Models: o.File.ModelNames(),
		Log: p.log.With("role", "batch"), Metrics: p.o.Metrics, MaxFileBytes: p.env.MaxFileBytes,
		Limits: config.NewTenantLimits(p.env.TenantLimits, o.File.Tenants), FilesMaxBytes: p.env.FilesMaxBytes, FileExpiry: p.env.FileExpiry}
	return p, nil
}

// Transport is the HTTP transport for models and engines: many idle connections per
// host, since a fleet talks to few hosts at high rates.
func Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 512
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// warnRecordsBound warns when the tenants' storage quotas together exceed the records
// bucket's bound (or it has none): then tenants within their quotas can fill it.
func warnRecordsBound(log *slog.Logger, maxBytes int64, limits *config.TenantLimits) {
	total, unbounded := limits.StorageTotal()
	switch {
	case maxBytes <= 0:
		log.Warn("FLEET_RECORDS_MAX_BYTES is 0: the records bucket is unbounded, and a full JetStream store stops the JOBS and EVENTS streams too")
	case unbounded:
		log.Warn("a tenant has no storage quota (FLEET_TENANT_STORAGE_BYTES, limits.storageBytes): it can fill the records bucket", "records_max_bytes", maxBytes)
	case total > maxBytes:
		log.Warn("the tenants' storage quotas together exceed the records bucket (FLEET_RECORDS_MAX_BYTES): tenants within their quotas can fill it", "quotas_bytes", total, "records_max_bytes", maxBytes)
	}
}
