package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/ingress/console"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

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
			Agents: agentInfos, Backends: agents, WebhookSecrets: agentSecrets, Failpoint: p.failpoint()},
	}
	p.batches.Research = o.Research // research batch lines
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

// webhooksOf builds the callback service: the delivery schedule and SSRF allow-list
// from the environment, the tenants' signing secrets as config.File.Resolve filled
// them in.
func webhooksOf(env config.Env, f *config.File, b *bus.Bus, store *state.Store, log *slog.Logger, m *metrics.Metrics) (*webhook.Service, error) {
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
