package fleet

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/provider"
	"github.com/searchfleet/searchfleet/pkg/research"
)

// runChat starts the chat role: new jobs (interactive and batch), resumes, the chat
// role's dead letters, the max-deliveries watch and the deadline reaper.
func (p *process) runChat(ctx context.Context) error {
	// Provider key cooldowns live in Redis: a key one chat worker saw refused rests
	// for all (within cooldownFresh).
	cool := countedCooldowns{Cooldowns: provider.Cached(p.store.Searches.ModelKeyCooldowns(), cooldownFresh), rests: p.o.Metrics.ModelKeyCooldowns}
	models, err := modelsOf(p.o.File, p.modelHC, modelOptions{Cooldowns: cool, Log: p.log.With("role", "chat"),
		Deprecation: func(provider, signal string) { p.o.Metrics.ProviderDeprecation.WithLabelValues(provider, signal).Inc() }})
	if err != nil {
		return err
	}
	env := p.env
	w := &chat.Worker{Bus: p.bus, Store: p.store.Chains, Models: models, Tools: p.tools, Classifier: p.classify,
		MaxHops: env.MaxHops, MaxSearches: env.MaxSearches, MaxFetches: env.MaxFetches, ModelTimeout: env.ModelTimeout, LeaseTTL: env.AckWait, StickyTTL: time.Hour,
		Ender: p.ender, Metrics: p.o.Metrics, Log: p.log.With("role", "chat"), ID: p.id, Failpoint: p.failpoint(), Records: p.store.Searches, Ledger: p.store.Ledger,
		Budgets:     p.o.File.Budgets(env.DefaultBudget),
		EvidenceKey: []byte(env.EvidenceSecret)}
	if env.EvidenceSecret == "" {
		p.log.Warn("FLEET_EVIDENCE_SECRET is unset: this process keys the evidence delimiters with a random secret; a fleet of several chat worker processes must set the same secret on all of them")
	}
	// New jobs and resumes each fill ChatConcurrency slots by the tenants' shares,
	// bands first; batch lines hold at most BatchConcurrency of them and start at most
	// BatchRate a second (a line over the rate waits in the stream).
	steps := p.shares(maxSteps)
	jobLanes := bus.JobLanes(p.timing(bus.ConsumerChat), env.BatchConcurrency)
	jobLanes.Rates = map[string]float64{bus.BandBatch: env.BatchRate}
	if err := consumeFair(ctx, p, jobLanes, steps, w.HandleJob, env.ChatConcurrency); err != nil {
		return err
	}
	if err := consumeFair(ctx, p, bus.ResumeLanes(p.timing(bus.ConsumerResume)), steps, w.HandleResume, env.ChatConcurrency); err != nil {
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
		AgentPollEvery: env.ResearchAgentPoll, Failpoint: p.failpoint()}
	for _, id := range p.engines.IDs() {
		if e, ok := p.engines.Get(id); ok {
			rw.SearchUSD = max(rw.SearchUSD, engines.PriceOf(e))
		}
	}
	// The lanes hold the runs' steps, a tenant's runs in band async and a batch's
	// runs in band batch, taken by fair shares; the family's own subject the steps
	// published to no lane (queued before the lanes, or an agent's next poll whose
	// run could not be read).
	if err := consume(ctx, p, bus.ResearchConsumer(p.timing(bus.ConsumerResearch)), rw.Handle, env.ChatConcurrency); err != nil {
		return err
	}
	lanes, err := bus.ConsumeFair(ctx, p.bus, bus.ResearchLanes(p.timing(bus.ConsumerResearch)), p.shares(noCap), rw.Handle, p.consumeOptions(env.ChatConcurrency))
	if err != nil {
		return err
	}
	p.workers = append(p.workers, lanes) // its lag is the family's, read with the researcher consumer's
	if err := p.consumeDeadLetters(ctx, bus.DeadLetterConsumer(), w.HandleDeadLetter); err != nil {
		return err
	}
	stop, err := p.bus.WatchMaxDeliveries(ctx)
	if err != nil {
		return err
	}
	p.stops = append(p.stops, stop)
	reaper := jobs.NewReaper(p.store.Jobs, p.ender, p.id, p.log.With("role", "reaper"))
	reaper.Others = rw.SweepCancel // a run's cancel whose step may not be out
	go reaper.Run(ctx, 2*time.Second)
	p.log.Info("chat worker running", "models", p.o.File.ModelNames(), "concurrency", env.ChatConcurrency)
	return nil
}

// modelOptions are what models takes beside the config file and the HTTP client.
type modelOptions struct {
	// Cooldowns rest the provider keys refused (state.ModelKeyCooldowns, shared by
	// every chat worker); nil remembers nothing between calls.
	Cooldowns provider.Cooldowns
	// Log receives the one warning per refused key; nil is slog.Default().
	Log *slog.Logger
	// Deprecation counts the models' answers that announce or carry out their
	// endpoint's retirement, by provider and signal (engines.DeprecationWatch, which
	// also logs one warning per provider per day); nil counts none.
	Deprecation func(provider, signal string)
}

// modelsOf builds the main-model callers of the config file, with the provider keys
// config.File.Resolve filled in: an upstream.Caller in the provider's protocol (for
// Kimi and GLM with their own search on, their variant of the Chat codec). Each
// provider's models share one provider.Credentials (its keys or access token), so they
// rotate and rest together.
func modelsOf(f *config.File, hc *http.Client, o modelOptions) (map[string]chat.Model, error) {
	out := map[string]chat.Model{}
	creds := map[string]*provider.Credentials{}
	watch := engines.NewDeprecationWatch(o.Log, o.Deprecation)
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
		model := chat.Model{Provider: m.Provider, Upstream: m.Model, Protocol: cmp.Or(p.Protocol, upstream.ModelOpenAIChat), NativeSearch: f.NativeSearch(name),
			Client: upstream.New(api, m.Provider, p.BaseURL, p.APIKey, watch.Client(hc, m.Provider), upstream.Options{NativeSearch: f.NativeSearch(name), Credentials: cr, Reasons: f.ReasonsUnasked(name)})}
		if m.Pricing != nil {
			model.Pricing = *m.Pricing
		}
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
	api, ok := upstream.ModelAPIFor(p.Protocol)
	if ok && api == openaichat.Model && f.NativeSearch(name) {
		api = upstream.ChatModelFor(p.Kind) // Kimi's and GLM's own search, in their Chat API
	}
	return api, ok
}

// failpoint is the workers' Failpoint: the options' own, else an exit at
// FLEET_FAILPOINT (nil: none).
func (p *process) failpoint() func(name string) {
	if p.o.Failpoint != nil {
		return p.o.Failpoint
	}
	return chat.ExitAt(p.o.Env.Failpoint)
}

// noCap caps no tenant's slots beyond its share.
func noCap(config.Limits) int { return 0 }
