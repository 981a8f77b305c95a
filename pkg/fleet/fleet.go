// Package fleet wires the fleet's roles — ingress, chat worker, search worker — from
// configuration. Each cmd/ binary runs one role through Run; the all-in-one process
// and the end-to-end tests run all three in one process the same way.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/ingress/console"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/netguard"
	"github.com/searchfleet/searchfleet/pkg/provider"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/search"
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
	// HTTPClient reaches models and engines; nil means a tuned default (ModelClient
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
		p.modelHC = ModelClient()
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
	if p.tools, p.classify, err = Intent(o.File); err != nil {
		return fail(err)
	}
	p.ender = jobs.NewEnder(p.store.Jobs, p.bus, p.o.Metrics, p.log)
	if p.hooks, err = Webhooks(p.env, o.File, p.bus, p.store, p.log, p.o.Metrics); err != nil {
		return fail(err)
	}
	p.batches = &batch.Service{Bus: p.bus, Store: batch.StoreOf(p.store), Webhooks: p.hooks, Ender: p.ender, Models: o.File.ModelNames(),
		Log: p.log.With("role", "batch"), Metrics: p.o.Metrics, MaxFileBytes: p.env.MaxFileBytes,
		Limits: config.NewTenantLimits(p.env.TenantLimits, o.File.Tenants), FilesMaxBytes: p.env.FilesMaxBytes, FileExpiry: p.env.FileExpiry}
	return p, nil
}

// consumeFair starts a family of lanes (bus.ConsumeFair) and keeps it for the drain.
func consumeFair[T bus.Payload](ctx context.Context, p *process, spec bus.FairSpec, shares bus.Shares, h bus.Handler[T], concurrency int) error {
	w, err := bus.ConsumeFair(ctx, p.bus, spec, shares, h, p.consumeOptions(concurrency))
	if err != nil {
		return err
	}
	p.workers = append(p.workers, w)
	p.started(spec.Family)
	return nil
}

// shares are the tenants' fair shares of a process's slots (config.Limits weight),
// capped by cap of their limits (maxSteps, maxSearches).
func (p *process) shares(limit func(config.Limits) int) bus.Shares {
	lim := config.NewTenantLimits(p.env.TenantLimits, p.o.File.Tenants)
	own := map[string]config.Limits{}
	for _, id := range lim.Tenants() {
		own[bus.Token(id)] = lim.Of(id)
	}
	def := p.env.TenantLimits.Or(config.Limits{})
	return func(tenant string) bus.Share {
		l, ok := own[tenant]
		if !ok {
			l = def
		}
		return bus.Share{Weight: l.Weight, Max: limit(l)}
	}
}

func maxSteps(l config.Limits) int    { return l.MaxSteps }
func maxSearches(l config.Limits) int { return l.MaxSearches }

// consume starts a consumer and keeps it for the drain.
func consume[T bus.Payload](ctx context.Context, p *process, spec bus.ConsumerSpec, h bus.Handler[T], concurrency int) error {
	w, err := bus.Consume(ctx, p.bus, spec, h, p.consumeOptions(concurrency))
	if err != nil {
		return err
	}
	p.workers = append(p.workers, w)
	p.started(spec)
	return nil
}

func (p *process) consumeOptions(concurrency int) bus.ConsumeOptions {
	return bus.ConsumeOptions{Concurrency: concurrency, Log: p.log,
		Observe: func(consumer string, d bus.Decision, elapsed time.Duration) {
			p.o.Metrics.ObserveDelivery(consumer, d.Action.String(), elapsed)
		},
		InFlight: func(consumer string, delta int) {
			p.o.Metrics.StepsInFlight.WithLabelValues(consumer).Add(float64(delta))
		}}
}

func (p *process) consumeDeadLetters(ctx context.Context, spec bus.ConsumerSpec, h bus.Handler[bus.DeadLetter]) error {
	w, err := bus.ConsumeDeadLetters(ctx, p.bus, spec, h, p.consumeOptions(4))
	if err != nil {
		return err
	}
	p.workers = append(p.workers, w)
	p.started(spec)
	return nil
}

// timing is a consumer's default timing with the configured AckWait.
func (p *process) timing(name string) bus.Timing {
	t := bus.TimingFor(name)
	t.AckWait = p.env.AckWait
	if name == bus.ConsumerChat || name == bus.ConsumerResume {
		t.MaxAckPending = p.env.ChatInFlight
	}
	return t
}

// drain lets every started consumer finish its in-flight messages, once.
func (p *process) drain() {
	if p.drained {
		return
	}
	p.drained = true
	for _, stop := range p.stops {
		stop()
	}
	dctx, cancel := context.WithTimeout(context.Background(), p.env.DrainTimeout)
	defer cancel()
	for _, w := range p.workers {
		if err := w.Drain(dctx); err != nil {
			p.log.Warn("drain", "err", err)
		}
	}
}

// runChat starts the chat role: new jobs (interactive and batch), resumes, the chat
// role's dead letters, the max-deliveries watch and the deadline reaper.
func (p *process) runChat(ctx context.Context) error {
	// Provider key cooldowns live in Redis: a key one chat worker saw refused rests
	// for all (within cooldownFresh).
	cool := countedCooldowns{Cooldowns: provider.Cached(p.store.Searches.ModelKeyCooldowns(), cooldownFresh), rests: p.o.Metrics.ModelKeyCooldowns}
	models, err := ModelsWith(p.o.File, p.modelHC, ModelOptions{Cooldowns: cool, Log: p.log.With("role", "chat")})
	if err != nil {
		return err
	}
	env := p.env
	w := &chat.Worker{Bus: p.bus, Store: p.store.Chains, Models: models, Tools: p.tools, Classifier: p.classify,
		MaxHops: env.MaxHops, MaxSearches: env.MaxSearches, MaxFetches: env.MaxFetches, ModelTimeout: env.ModelTimeout, LeaseTTL: env.AckWait, StickyTTL: time.Hour,
		Ender: p.ender, Metrics: p.o.Metrics, Log: p.log.With("role", "chat"), ID: p.id, Failpoint: chat.ExitAt(env.Failpoint), Records: p.store.Searches, Ledger: p.store.Ledger,
		Budgets:     p.o.File.Budgets(env.DefaultBudget),
		EvidenceKey: []byte(env.EvidenceSecret)}
	if env.EvidenceSecret == "" {
		p.log.Warn("FLEET_EVIDENCE_SECRET is unset: this process keys the evidence delimiters with a random secret; a fleet of several chat worker processes must set the same secret on all of them")
	}
	// New jobs and resumes each fill ChatConcurrency slots by the tenants' shares,
	// bands first; batch lines hold at most BatchConcurrency of them.
	steps := p.shares(maxSteps)
	if err := consumeFair(ctx, p, bus.JobLanes(p.timing(bus.ConsumerChat), env.BatchConcurrency), steps, batchAdmission(env.BatchRate, w.HandleJob), env.ChatConcurrency); err != nil {
		return err
	}
	if err := consumeFair(ctx, p, bus.ResumeLanes(p.timing(bus.ConsumerResume)), steps, w.HandleResume, env.ChatConcurrency); err != nil {
		return err
	}
	// Batch lines an earlier release published on fleet.jobs.v1.batch.
	if err := consume(ctx, p, bus.BatchConsumer(p.timing(bus.ConsumerBatch)), batchAdmission(env.BatchRate, w.HandleJob), env.BatchConcurrency); err != nil {
		return err
	}
	// Research runs' steps (pkg/research): planner, fan-in, reflection, writer,
	// verification, in the chat workers' processes.
	agents, _, _, err := researchAgents(p.o.File, env.PublicURL)
	if err != nil {
		return err
	}
	rw := &research.Worker{Bus: p.bus, Store: p.store, Models: models, Ender: p.ender, Webhooks: p.hooks, Budgets: w.Budgets,
		Log: p.log.With("role", "research"), ID: p.id, LeaseTTL: env.AckWait, ModelTimeout: env.ModelTimeout, Agents: agents,
		AgentPollEvery: env.ResearchAgentPoll}
	for _, id := range p.engines.IDs() {
		if e, ok := p.engines.Get(id); ok {
			rw.SearchUSD = max(rw.SearchUSD, engines.PriceOf(e))
		}
	}
	if err := consume(ctx, p, bus.ResearchConsumer(p.timing(bus.ConsumerResearch)), rw.Handle, env.ChatConcurrency); err != nil {
		return err
	}
	if err := p.consumeDeadLetters(ctx, bus.DeadLetterConsumer(), w.HandleDeadLetter); err != nil {
		return err
	}
	stop, err := p.bus.WatchMaxDeliveries(ctx)
	if err != nil {
		return err
	}
	p.stops = append(p.stops, stop)
	go jobs.NewReaper(p.store.Jobs, p.ender, p.id, p.log.With("role", "reaper")).Run(ctx, 2*time.Second)
	p.log.Info("chat worker running", "models", p.o.File.ModelNames(), "concurrency", env.ChatConcurrency)
	return nil
}

// runSearch starts one consumer per engine this process serves (FLEET_ENGINES, or all).
func (p *process) runSearch(ctx context.Context) error {
	ids := p.engines.IDs()
	if len(p.env.Engines) > 0 {
		for _, id := range p.env.Engines {
			if !slices.Contains(ids, id) {
				return fmt.Errorf("FLEET_ENGINES names %q, which is not a configured engine (%v)", id, ids)
			}
		}
		ids = p.env.Engines
	}
	w := &search.Worker{Bus: p.bus, Store: search.StoreOf(p.store), Engines: p.engines, Settings: Settings(p.o.File), Timeout: p.env.EngineTimeout,
		LeaseTTL: p.env.AckWait, Ender: p.ender, Metrics: p.o.Metrics, Log: p.log.With("role", "search"), ID: p.id,
		Budgets: p.o.File.Budgets(p.env.DefaultBudget)}
	searches := p.shares(maxSearches)
	for _, id := range ids {
		if err := consumeFair(ctx, p, bus.SearchLanes(id, p.timing(bus.ConsumerSearch(id))), searches, w.Handle, p.env.SearchConcurrency); err != nil {
			return err
		}
	}
	fw, err := p.fetchWorker()
	if err != nil {
		return err
	}
	if err := consume(ctx, p, bus.FetchConsumer(p.timing(bus.ConsumerFetch)), fw.Handle, p.env.SearchConcurrency); err != nil {
		return err
	}
	p.log.Info("search worker running", "engines", ids, "concurrency", p.env.SearchConcurrency, "web_fetch", true)
	return nil
}

// fetchWorker builds the web_fetch worker: every page is fetched through the webhook
// SSRF guard (FLEET_FETCH_ALLOW admits private ranges; tests allow loopback), capped
// at FLEET_FETCH_MAX_BYTES and FLEET_FETCH_TIMEOUT.
func (p *process) fetchWorker() (*search.FetchWorker, error) {
	g, err := p.fetchGuard()
	if err != nil {
		return nil, err
	}
	f := fetch.New(fetch.Options{Guard: g, MaxBytes: p.env.FetchMaxBytes, Timeout: p.env.FetchTimeout})
	return &search.FetchWorker{Bus: p.bus, Store: p.store.Searches, Fetcher: f, Ender: p.ender, LeaseTTL: p.env.AckWait, Metrics: p.o.Metrics,
		Log: p.log.With("role", "fetch"), ID: p.id}, nil
}

// fetchGuard is the SSRF guard of everything the fleet fetches for a client (web_fetch
// pages, files given by URL): public addresses only, unless FLEET_FETCH_ALLOW admits
// private ranges (tests allow loopback).
func (p *process) fetchGuard() (*netguard.Guard, error) {
	g := &netguard.Guard{}
	for _, c := range p.env.FetchAllow {
		pre, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("FLEET_FETCH_ALLOW: %w", err)
		}
		g.Allow = append(g.Allow, pre)
	}
	return g, nil
}

// runIngress starts the HTTP API and the work that runs beside it: webhook delivery,
// the finisher (finish hooks from terminal events), batch expansion and sweeps, and
// the dead letters of those.
func (p *process) runIngress(ctx context.Context, errc chan<- error) (*http.Server, error) {
	tenants, err := ingress.NewTenants(p.o.File.Tenants)
	if err != nil {
		return nil, err
	}
	if tenants == nil {
		p.log.Warn("no tenants configured: the API accepts requests without an API key")
	}
	env := p.env
	// Files given by URL are read through the web_fetch guard, each capped at a
	// request body's size (the bound of a file given to a model) and FLEET_FETCH_TIMEOUT.
	g, err := p.fetchGuard()
	if err != nil {
		return nil, err
	}
	agents, agentInfos, agentSecrets, err := researchAgents(p.o.File, env.PublicURL)
	if err != nil {
		return nil, err
	}
	secrets, dev := env.ReasoningSeal()
	sealer, err := wire.NewSealer(secrets...)
	if err != nil {
		return nil, fmt.Errorf("FLEET_REASONING_SECRET: %w", err)
	}
	if dev {
		p.log.Warn("FLEET_REASONING_SECRET is unset: the reasoning state given to Responses clients is sealed with the public development secret; set a secret of your own, the same on every ingress")
	}
	o := ingress.Options{Bus: p.bus, Store: ingress.StoreOf(p.store), Models: p.o.File.ModelNames(), Targets: modelTargets(p.o.File), Tools: p.tools, Tenants: tenants, Reasoning: sealer,
		MaxBody: env.MaxBodyBytes, JobTimeout: env.JobTimeout, SyncWait: env.JobTimeout + 5*time.Second,
		BodyTimeout: env.HTTPBodyTimeout, UploadTimeout: env.HTTPUploadTimeout, SSEMaxDuration: env.SSEMaxDuration,
		Metrics: p.o.Metrics, Log: p.log.With("role", "ingress"), Webhooks: p.hooks, Batches: p.batches, Ender: p.ender,
		Limits:  p.batches.Limits,
		Budgets: p.o.File.Budgets(env.DefaultBudget), MaxUnauthenticatedConns: env.HTTPMaxUnauthenticatedConns,
		MaxUnauthenticatedConnsPerSource: env.HTTPMaxUnauthenticatedConnsPerSource, UnauthenticatedIdle: env.HTTPUnauthenticatedIdle,
		ChatBillableParams: env.ChatBillableParams,
		FileURLs:           fetch.New(fetch.Options{Guard: g, MaxBytes: env.MaxBodyBytes, Timeout: env.FetchTimeout, UserAgent: "searchfleet-file/1"}),
		Console:            true, // the web console at /console/
		MCP:                true, // /mcp: the MCP tools call this API in process, with the caller's key
		Research: &research.Service{Bus: p.bus, Store: p.store, Models: p.o.File.ModelNames(), Timeout: env.ResearchTimeout,
			Agents: agentInfos, Backends: agents, WebhookSecrets: agentSecrets},
	}
	if p.records.MaxBytes() > 0 {
		o.Records, o.RecordsTenants = p.records, max(len(p.o.File.Tenants), 1)
	}
	s := ingress.New(o)
	if err := consume(ctx, p, bus.WebhookConsumer(p.timing(bus.ConsumerWebhooks)), p.hooks.Handle, p.hooks.Config.PoolSize()); err != nil {
		return nil, err
	}
	// The archive runs after the spend per model is counted (it reads the job's spend
	// ledger, which the archive moves) and before the other hooks, so the storage
	// quota's sees where the job's bytes now live.
	finisher := jobs.NewFinisher(p.store.Jobs, p.ender, p.o.Metrics, p.log.With("role", "finisher"), console.ModelSpend{Store: p.store.Ledger}, archiver{p.store, p.log}, research.Hook{Bus: p.bus, Store: p.store, Log: p.log.With("role", "research")}, p.hooks, p.batches, s)
	if err := consume(ctx, p, bus.FinisherConsumer(p.timing(bus.ConsumerFinisher)), finisher.Handle, 64); err != nil {
		return nil, err
	}
	if err := consume(ctx, p, bus.ExpandConsumer(p.timing(bus.ConsumerExpand)), p.batches.HandleExpand, 2); err != nil {
		return nil, err
	}
	if err := p.consumeDeadLetters(ctx, bus.IngressDeadLetterConsumer(), p.ingressDeadLetter); err != nil {
		return nil, err
	}
	go p.batches.Sweep(ctx, 10*time.Second)
	ln, err := net.Listen("tcp", env.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("FLEET_HTTP_ADDR %s: %w", env.HTTPAddr, err)
	}
	// Header and idle deadlines are the server's; body, answer and stream deadlines
	// are set per request by the API (ingress.Server.BodyTimeout and the rest).
	headerTimeout := env.HTTPHeaderTimeout
	if headerTimeout <= 0 {
		headerTimeout = 10 * time.Second
	}
	srv := s.HTTPServer(headerTimeout, env.HTTPIdleTimeout)
	go func() { errc <- srv.Serve(ln) }()
	p.log.Info("ingress listening", "addr", ln.Addr().String())
	if p.o.Listening != nil {
		p.o.Listening(ln.Addr().String())
	}
	return srv, nil
}

// ingressDeadLetter makes the ingress role's dead letters visible: a dead webhook
// delivery marks the webhook failed, a dead expansion fails its batch, and a terminal
// event whose finish hooks kept failing is logged for operators (it stays in the DLQ).
func (p *process) ingressDeadLetter(ctx context.Context, d *bus.Delivery[bus.DeadLetter]) error {
	dl := d.Msg
	p.log.Warn("dead letter", "kind", dl.MsgKind, "subject", dl.Subject, "consumer", dl.Consumer, "deliveries", dl.Deliveries, "reason", dl.Reason)
	switch dl.MsgKind {
	case bus.WebhookDelivery{}.Kind():
		return p.hooks.HandleDeadLetter(ctx, dl)
	case bus.BatchExpand{}.Kind():
		return p.batches.DeadLettered(ctx, dl)
	case bus.Event{}.Kind():
		p.log.Error("finish hooks of a job kept failing: its webhook or batch count may be missing", "subject", dl.Subject, "reason", dl.Reason)
	}
	return nil
}

// batchAdmission paces the batch consumer's handler: at most perSecond batch jobs start
// per second in this process (0: no limit). A job over the limit waits its turn in its
// batch slot (its message kept alive by the consumer's heartbeats), so a batch never
// takes more than that share of a worker, however fast its providers answer;
// interactive jobs have their own consumer and never wait here.
func batchAdmission(perSecond float64, h bus.Handler[bus.ChatJob]) bus.Handler[bus.ChatJob] {
	if perSecond <= 0 {
		return h
	}
	lim := rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/10)))
	return func(ctx context.Context, d *bus.Delivery[bus.ChatJob]) error {
		if d.Subject != bus.SubjectBatchJob && bus.BandOfSubject(d.Subject) != bus.BandBatch {
			return h(ctx, d) // not a batch line
		}
		if err := lim.Wait(ctx); err != nil {
			return err
		}
		return h(ctx, d)
	}
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

// ModelClient is the HTTP client of the main models: Transport, with no Timeout, since
// each call's context bounds it (FLEET_MODEL_TIMEOUT).
func ModelClient() *http.Client {
	return &http.Client{Transport: Transport()}
}

// Models builds the main-model callers of the config file, with the provider keys
// config.File.Resolve filled in: an upstream.Caller in the provider's protocol (for
// Kimi and GLM with their own search on, their variant of the Chat codec). Keys
// rotate, but no cooldown is remembered between calls (see ModelsWith).
func Models(f *config.File, hc *http.Client) (map[string]chat.Model, error) {
	return ModelsWith(f, hc, ModelOptions{})
}

// ModelOptions are what ModelsWith adds to Models.
type ModelOptions struct {
	// Cooldowns rest the provider keys refused (state.ModelKeyCooldowns, shared by
	// every chat worker); nil remembers nothing between calls.
	Cooldowns provider.Cooldowns
	// Log receives the one warning per refused key; nil is slog.Default().
	Log *slog.Logger
}

// ModelsWith is Models with shared key cooldowns: each provider's models share one
// provider.Credentials (its keys or access token), so they rotate and rest together.
func ModelsWith(f *config.File, hc *http.Client, o ModelOptions) (map[string]chat.Model, error) {
	out := map[string]chat.Model{}
	creds := map[string]*provider.Credentials{}
	for name, m := range f.Models {
		p := f.Providers[m.Provider]
		cr := creds[m.Provider]
		if cr == nil {
			keys := p.APIKeys
			if len(keys) == 0 {
				keys = []string{p.APIKey}
			}
			cr = provider.NewCredentials(m.Provider, keys, provider.CredentialOptions{KeyEnv: p.APIKeyEnv, Token: p.Token, Cooldowns: o.Cooldowns, Log: o.Log})
			creds[m.Provider] = cr
		}
		api, ok := modelAPI(f, name)
		if !ok {
			return nil, fmt.Errorf("providers.%s.protocol %q is not a main-model protocol", m.Provider, p.Protocol)
		}
		protocol := p.Protocol
		if protocol == "" {
			protocol = wire.ModelOpenAIChat
		}
		model := chat.Model{Provider: m.Provider, Upstream: m.Model, Protocol: protocol,
			Client: upstream.New(api, m.Provider, p.BaseURL, p.APIKey, hc, upstream.Options{NativeSearch: f.NativeSearch(name), Credentials: cr, Reasons: f.ReasonsUnasked(name)})}
		if m.Pricing != nil {
			model.Pricing = *m.Pricing
		}
		model.NativeSearch = f.NativeSearch(name)
		out[name] = model
	}
	return out, nil
}

// modelTargets are the protocol and provider model of each client model name of the
// config file, for the ingress's notes on reasoning settings a model cannot take and
// its refusal of files a model cannot read.
func modelTargets(f *config.File) map[string]ingress.ModelTarget {
	out := map[string]ingress.ModelTarget{}
	for name, m := range f.Models {
		if mapi, ok := modelAPI(f, name); ok {
			out[name] = ingress.ModelTarget{Protocol: mapi.Protocol(), Model: m.Model, API: mapi}
		}
	}
	return out
}

// modelAPI is the protocol the fleet calls the model name with: the provider's, in
// Kimi's or GLM's Chat API for a model that runs their own search.
func modelAPI(f *config.File, name string) (wire.ModelAPI, bool) {
	p := f.Providers[f.Models[name].Provider]
	api, ok := wire.ModelAPIFor(p.Protocol)
	if ok && api == wire.ChatModel && f.NativeSearch(name) {
		api = wire.ChatModelFor(p.Kind) // Kimi's and GLM's own search, in their Chat API
	}
	return api, ok
}

// Intent builds the web_search toolset and classifier of the config file (a nil
// toolset when no engine is configured). The classifier has the configured keyword
// sets and, unless one of them is named "freshness", the built-in Freshness set
// (intent.DefaultKeywordSets): "the latest news", "the current price" and 今天的天气
// are offered the tool with no keywords configured.
func Intent(f *config.File) (*intent.Toolset, *intent.Classifier, error) {
	var configured []intent.KeywordSet
	for _, k := range f.WebSearch.Keywords {
		configured = append(configured, intent.KeywordSet{Name: k.Name, Keywords: k.Keywords})
	}
	extra := intent.DefaultKeywordSets(configured...)
	c := intent.NewClassifier(extra...)
	if len(f.WebSearch.Engines) == 0 {
		return nil, c, nil
	}
	ic := intent.Config{InjectPolicy: f.WebSearch.InjectPolicy, Keywords: extra}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		return nil, nil, err
	}
	kindOf := map[string]string{}
	for _, ec := range cfgs {
		kindOf[ec.ID] = ec.Kind
	}
	for _, e := range f.WebSearch.Engines {
		ic.Engines = append(ic.Engines, intent.Engine{ID: e.ID, ProviderKey: e.ProviderKey, Kind: kindOf[e.ID], Description: e.Description, Default: e.Default, Languages: e.Languages})
	}
	var route []string
	for _, r := range f.Routing.WebSearch {
		route = append(route, r.Targets...)
	}
	if err := ic.Validate(route); err != nil {
		return nil, nil, err
	}
	ts, err := intent.NewToolset(ic)
	if err != nil {
		return nil, nil, err
	}
	return ts, c, nil
}

// Webhooks builds the callback service: the delivery schedule and SSRF allow-list
// from the environment, the tenants' signing secrets as config.File.Resolve filled
// them in.
func Webhooks(env config.Env, f *config.File, b *bus.Bus, store *state.Store, log *slog.Logger, m *metrics.Metrics) (*webhook.Service, error) {
	cfg := webhook.Config{Schedule: env.WebhookSchedule, Timeout: env.WebhookTimeout, TenantSecrets: map[string]string{}, SecretOverlapUntil: map[string]time.Time{},
		Pool: env.WebhookPool, TenantInFlight: env.WebhookTenantInFlight, HostInFlight: env.WebhookHostInFlight, Defer: env.WebhookDefer}
	for _, c := range env.WebhookAllow {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("FLEET_WEBHOOK_ALLOW: %w", err)
		}
		cfg.Allow = append(cfg.Allow, p)
	}
	for _, t := range f.Tenants {
		if t.WebhookSecretEnv == "" {
			continue
		}
		if t.WebhookSecret == "" {
			return nil, fmt.Errorf("tenant %s: no webhook secret (%s not resolved)", t.ID, t.WebhookSecretEnv)
		}
		cfg.TenantSecrets[t.ID] = t.WebhookSecret
		if !t.WebhookSecretOverlapUntil.IsZero() {
			cfg.SecretOverlapUntil[t.ID] = t.WebhookSecretOverlapUntil
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &webhook.Service{Bus: b, Store: store.Webhooks, Config: cfg, Log: log.With("role", "webhooks"), Metrics: m}, nil
}

// cooldownFresh is how long a process trusts what it read of a key's rest: a rest
// another process starts reaches this one within it.
const cooldownFresh = time.Second

// countedCooldowns is the provider layer's one Cooldowns with each rest counted once,
// whichever worker starts it, in rests: fleet_engine_key_cooldowns_total for the
// engines' keys, fleet_model_key_cooldowns_total for the main models' (by scope: the
// engine id or the provider name, and the reason).
type countedCooldowns struct {
	provider.Cooldowns
	rests *prometheus.CounterVec
}

func (c countedCooldowns) CoolDown(ctx context.Context, scope, fp string, reason provider.Kind, d time.Duration) (bool, error) {
	first, err := c.Cooldowns.CoolDown(ctx, scope, fp, reason, d)
	if first {
		c.rests.WithLabelValues(scope, string(reason)).Inc()
	}
	return first, err
}

// Settings are the search workers' per-engine limits from the config file.
func Settings(f *config.File) map[string]search.Settings {
	out := map[string]search.Settings{}
	kindOf := map[string]string{}
	cfgs, _ := f.EngineConfigs() // a loaded file has been validated
	for _, c := range cfgs {
		kindOf[c.ID] = c.Kind
	}
	for _, e := range f.WebSearch.Engines {
		s := search.Settings{CacheTTL: time.Duration(e.CacheTTL), Fallback: e.Fallback,
			Google: intent.GoogleBacked(intent.Engine{ID: e.ID, ProviderKey: e.ProviderKey, Kind: kindOf[e.ID]})}
		if e.RateLimit != nil {
			s.PerSecond, s.Burst = e.RateLimit.PerSecond, e.RateLimit.Burst
		}
		out[e.ID] = s
	}
	return out
}

// archiver is the finish hook that moves an ended job's record off Redis to the
// records bucket (state.Store.ArchiveJob); a failure is retried with the terminal
// event, and the record stays readable from Redis meanwhile.
type archiver struct {
	store *state.Store
	log   *slog.Logger
}

func (a archiver) JobFinished(ctx context.Context, job *state.Job) error {
	_, err := a.store.Jobs.ArchiveEnded(ctx, job) // the hash the finisher read (ReadEnded)
	if errors.Is(err, bus.ErrRecordsFull) {
		// The record stays in Redis (charged to its tenant's quota) until it expires:
		// a full bucket must not hold up the job's other hooks, nor other tenants'.
		a.log.Warn("records: the records bucket is full (FLEET_RECORDS_MAX_BYTES); an ended job's record stays in Redis", "job", job.ID, "tenant", job.Tenant)
		return nil
	}
	return err
}

// warnRecordsBound warns when the tenants' storage quotas together exceed the records
// bucket's bound (or it has none): then tenants within their quotas can fill it.
func warnRecordsBound(log *slog.Logger, maxBytes int64, limits *config.TenantLimits) {
	total, unbounded := limits.StorageTotal()
	switch {
	case maxBytes <= 0:
		log.Warn("FLEET_RECORDS_MAX_BYTES is unset: the records bucket is unbounded, and a full JetStream store stops the JOBS and EVENTS streams too")
	case unbounded:
		log.Warn("a tenant has no storage quota (FLEET_TENANT_STORAGE_BYTES, limits.storageBytes): it can fill the records bucket", "records_max_bytes", maxBytes)
	case total > maxBytes:
		log.Warn("the tenants' storage quotas together exceed the records bucket (FLEET_RECORDS_MAX_BYTES): tenants within their quotas can fill it", "quotas_bytes", total, "records_max_bytes", maxBytes)
	}
}
