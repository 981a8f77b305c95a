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
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/searchfleet/searchfleet/pkg/api"
	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// Roles selects what a process does.
type Roles struct {
	Ingress bool
	Chat    bool
	Search  bool
}

// Options configure Run.
type Options struct {
	Env   config.Env
	File  *config.File
	Roles Roles
	Redis redis.UniversalClient
	Log   *slog.Logger
	// Metrics defaults to a new registry.
	Metrics *metrics.Metrics
	// HTTPClient reaches models and engines; nil means a tuned default.
	HTTPClient *http.Client
	// Listening, if set, is called with ingress's address once it accepts requests.
	Listening func(addr string)
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
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: Transport()}
	}
	env := o.Env
	host, _ := os.Hostname()
	workerID := fmt.Sprintf("%s-%d", host, os.Getpid())
	var err error

	var b *bus.Bus
	if o.Embedded != nil {
		b, err = o.Embedded.Connect(ctx, "searchfleet-"+workerID, log)
	} else {
		b, err = bus.Connect(ctx, env.NATSURL, "searchfleet-"+workerID, log)
	}
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.EnsureStreams(ctx, bus.Limits{Replicas: env.NATSReplicas, Memory: o.Memory}); err != nil {
		return fmt.Errorf("nats streams: %w", err)
	}
	store := state.New(o.Redis, env.KeyPrefix, env.Retention)
	if err := store.LoadScripts(ctx); err != nil {
		return err
	}

	engineCfgs, err := o.File.EngineConfigs()
	if err != nil {
		return err
	}
	reg, err := engines.FromConfig(engineCfgs, hc)
	if err != nil {
		return err
	}
	tools, classifier, err := Intent(o.File)
	if err != nil {
		return err
	}

	var workers []*bus.Worker
	observe := func(consumer string, d bus.Decision, elapsed time.Duration) {
		o.Metrics.ObserveDelivery(consumer, d.Action.String(), elapsed)
	}
	consume := func(w *bus.Worker, err error) error {
		if err != nil {
			return err
		}
		workers = append(workers, w)
		return nil
	}
	// Every way out of Run drains what it started: a SIGTERM that lands while later
	// consumers are still being set up must not drop the steps the first ones took.
	drained := false
	stopAll := func() {
		if drained {
			return
		}
		drained = true
		dctx, cancel := context.WithTimeout(context.Background(), env.DrainTimeout)
		defer cancel()
		for _, w := range workers {
			if err := w.Drain(dctx); err != nil {
				log.Warn("drain", "err", err)
			}
		}
	}
	defer stopAll()
	timing := func(name string) bus.Timing {
		t := bus.TimingFor(name)
		t.AckWait = env.AckWait
		return t
	}

	// Webhooks and batches: every role may finish jobs (and so enqueue callbacks and
	// count batch lines); ingress delivers callbacks and expands batches.
	hooks, err := Webhooks(env, o.File, b, store, log, o.Metrics)
	if err != nil {
		return err
	}
	batches := &batch.Service{Bus: b, Store: store, Webhooks: hooks, Models: o.File.ModelNames(), Log: log.With("role", "batch"), Metrics: o.Metrics, MaxFileBytes: env.MaxFileBytes}
	hooks.BatchStatus = batches.WebhookStatus
	onFinish := func(ctx context.Context, job *state.Job) error {
		return errors.Join(hooks.JobFinished(ctx, job), batches.JobFinished(ctx, job))
	}

	if o.Roles.Chat {
		models, err := Models(o.File, hc)
		if err != nil {
			return err
		}
		w := &chat.Worker{Bus: b, Store: store, Models: models, Tools: tools, Classifier: classifier,
			MaxHops: env.MaxHops, MaxSearches: env.MaxSearches, ModelTimeout: env.ModelTimeout, LeaseTTL: env.AckWait, StickyTTL: time.Hour,
			Metrics: o.Metrics, Log: log.With("role", "chat"), ID: workerID, OnFinish: onFinish,
			DeadLetters: map[string]func(context.Context, bus.DeadLetter) error{
				bus.BatchExpand{}.Kind(): batches.DeadLettered,
				bus.WebhookDelivery{}.Kind(): func(ctx context.Context, dl bus.DeadLetter) error {
					d, _, err := bus.Decode[bus.WebhookDelivery](dl.Data)
					if err != nil {
						return nil
					}
					return hooks.DeadLettered(ctx, d)
				},
			}}
		co := bus.ConsumeOptions{Concurrency: env.ChatConcurrency, Log: log, Observe: observe}
		if err := consume(bus.Consume(ctx, b, bus.ChatConsumer(timing(bus.ConsumerChat)), w.HandleJob, co)); err != nil {
			return err
		}
		if err := consume(bus.Consume(ctx, b, bus.ResumeConsumer(timing(bus.ConsumerResume)), w.HandleResume, co)); err != nil {
			return err
		}
		bo := co
		bo.Concurrency = env.BatchConcurrency
		if err := consume(bus.Consume(ctx, b, bus.BatchConsumer(timing(bus.ConsumerBatch)), batchAdmission(env.BatchRate, w.HandleJob), bo)); err != nil {
			return err
		}
		do := co
		do.Concurrency = 4
		if err := consume(bus.ConsumeDeadLetters(ctx, b, w.HandleDeadLetter, do)); err != nil {
			return err
		}
		stop, err := b.WatchMaxDeliveries(ctx)
		if err != nil {
			return err
		}
		defer stop()
		go w.Reap(ctx, 2*time.Second)
		log.Info("chat worker running", "models", o.File.ModelNames(), "concurrency", env.ChatConcurrency)
	}

	if o.Roles.Search {
		ids := reg.IDs()
		if len(env.Engines) > 0 {
			for _, id := range env.Engines {
				if !slices.Contains(ids, id) {
					stopAll()
					return fmt.Errorf("FLEET_ENGINES names %q, which is not a configured engine (%v)", id, ids)
				}
			}
			ids = env.Engines
		}
		w := &search.Worker{Bus: b, Store: store, Engines: reg, Settings: Settings(o.File), Timeout: env.EngineTimeout, LeaseTTL: env.AckWait,
			Metrics: o.Metrics, Log: log.With("role", "search"), ID: workerID}
		so := bus.ConsumeOptions{Concurrency: env.SearchConcurrency, Log: log, Observe: observe}
		for _, id := range ids {
			if err := consume(bus.Consume(ctx, b, bus.SearchConsumer(id, timing(bus.ConsumerSearch(id))), w.Handle, so)); err != nil {
				stopAll()
				return err
			}
		}
		log.Info("search worker running", "engines", ids, "concurrency", env.SearchConcurrency)
	}

	var srv *http.Server
	errc := make(chan error, 1)
	if o.Roles.Ingress {
		tenants, err := api.NewTenants(o.File.Tenants)
		if err != nil {
			stopAll()
			return err
		}
		if tenants == nil {
			log.Warn("no tenants configured: the API accepts requests without an API key")
		}
		s := &api.Server{Bus: b, Store: store, Models: o.File.ModelNames(), Tools: tools, Tenants: tenants,
			MaxBody: env.MaxBodyBytes, JobTimeout: env.JobTimeout, SyncWait: env.JobTimeout + 5*time.Second,
			Metrics: o.Metrics, Log: log.With("role", "ingress"), Webhooks: hooks, Batches: batches, OnFinish: onFinish}
		io := bus.ConsumeOptions{Concurrency: 64, Log: log, Observe: observe}
		if err := consume(bus.Consume(ctx, b, bus.WebhookConsumer(timing(bus.ConsumerWebhooks)), hooks.Handle, io)); err != nil {
			stopAll()
			return err
		}
		eo := io
		eo.Concurrency = 2
		if err := consume(bus.Consume(ctx, b, bus.ExpandConsumer(timing(bus.ConsumerExpand)), batches.HandleExpand, eo)); err != nil {
			stopAll()
			return err
		}
		go batches.Sweep(ctx, 10*time.Second)
		ln, err := net.Listen("tcp", env.HTTPAddr)
		if err != nil {
			stopAll()
			return fmt.Errorf("FLEET_HTTP_ADDR %s: %w", env.HTTPAddr, err)
		}
		srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- srv.Serve(ln) }()
		log.Info("ingress listening", "addr", ln.Addr().String())
		if o.Listening != nil {
			o.Listening(ln.Addr().String())
		}
	}

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("ingress stopped", "err", err)
		}
	}
	log.Info("shutting down: draining")
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), env.DrainTimeout)
		srv.Shutdown(sctx)
		cancel()
	}
	stopAll()
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

// Models builds the main-model clients of the config file.
func Models(f *config.File, hc *http.Client) (map[string]chat.Model, error) {
	out := map[string]chat.Model{}
	for name, m := range f.Models {
		p := f.Providers[m.Provider]
		key := ""
		if p.APIKeyEnv != "" {
			key = os.Getenv(p.APIKeyEnv)
		}
		out[name] = chat.Model{Provider: m.Provider, Client: llm.NewClient(m.Provider, p.BaseURL, key, hc), Upstream: m.Model}
	}
	return out, nil
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
		ic.Engines = append(ic.Engines, intent.Engine{ID: e.ID, ProviderKey: e.ProviderKey, Kind: kindOf[e.ID], Description: e.Description, Default: e.Default})
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
// from the environment, the tenants' signing secrets from the variables the config
// file names.
func Webhooks(env config.Env, f *config.File, b *bus.Bus, store *state.Store, log *slog.Logger, m *metrics.Metrics) (*webhook.Service, error) {
	cfg := webhook.Config{Schedule: env.WebhookSchedule, Timeout: env.WebhookTimeout, TenantSecrets: map[string]string{}}
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
		sec := os.Getenv(t.WebhookSecretEnv)
		if sec == "" {
			return nil, fmt.Errorf("tenant %s: %s is not set", t.ID, t.WebhookSecretEnv)
		}
		cfg.TenantSecrets[t.ID] = sec
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &webhook.Service{Bus: b, Store: store, Config: cfg, Log: log.With("role", "webhooks"), Metrics: m}, nil
}

// Settings are the search workers' per-engine limits from the config file.
func Settings(f *config.File) map[string]search.Settings {
	out := map[string]search.Settings{}
	for _, e := range f.WebSearch.Engines {
		s := search.Settings{CacheTTL: time.Duration(e.CacheTTL)}
		if e.RateLimit != nil {
			s.PerSecond, s.Burst = e.RateLimit.PerSecond, e.RateLimit.Burst
		}
		out[e.ID] = s
	}
	return out
}
