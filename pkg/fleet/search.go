package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/netguard"
	"github.com/searchfleet/searchfleet/pkg/provider"
	"github.com/searchfleet/searchfleet/pkg/search"
)

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
	w := &search.Worker{Bus: p.bus, Store: search.StoreOf(p.store), Engines: p.engines, Settings: settingsOf(p.o.File), Timeout: p.env.EngineTimeout,
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
	var f fetch.PageFetcher = fetch.New(fetch.Options{Guard: g, MaxBytes: p.env.FetchMaxBytes, Timeout: p.env.FetchTimeout})
	if base, key, ok := p.o.File.FetchBackend(); ok {
		f = fetch.NewParallel(fetch.ParallelOptions{BaseURL: base, APIKey: key, Client: p.hc, Timeout: p.env.FetchTimeout})
	}
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

// settingsOf are the search workers' per-engine limits from the config file.
func settingsOf(f *config.File) map[string]search.Settings {
	out := map[string]search.Settings{}
	kindOf := map[string]string{}
	cfgs, _ := f.EngineConfigs() // a loaded file has been validated
	for _, c := range cfgs {
		kindOf[c.ID] = c.Kind
	}
	for _, e := range f.WebSearch.Engines {
		s := search.Settings{CacheTTL: time.Duration(e.CacheTTL), SharedCache: e.CacheShared, Fallback: e.Fallback,
			Google: intent.GoogleBacked(intent.Engine{ID: e.ID, ProviderKey: e.ProviderKey, Kind: kindOf[e.ID]})}
		if e.RateLimit != nil {
			s.PerSecond, s.Burst = e.RateLimit.PerSecond, e.RateLimit.Burst
		}
		out[e.ID] = s
	}
	return out
}

// intentOf builds the web_search toolset and classifier of the config file (a nil
// toolset when no engine is configured). The classifier has the configured keyword
// sets and, unless one of them is named "freshness", the built-in Freshness set
// (intent.DefaultKeywordSets): "the latest news", "the current price" and 今天的天气
// are offered the tool with no keywords configured.
func intentOf(f *config.File) (*intent.Toolset, *intent.Classifier, error) {
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
	cfgOf := map[string]engines.Config{}
	for _, ec := range cfgs {
		cfgOf[ec.ID] = ec
	}
	for _, e := range f.WebSearch.Engines {
		ie := intent.Engine{ID: e.ID, ProviderKey: e.ProviderKey, Kind: cfgOf[e.ID].Kind, Description: e.Description, Default: e.Default, Languages: e.Languages}
		if c, err := engines.CapabilitiesOf(cfgOf[e.ID]); err == nil {
			ie.Honours = &c
		}
		ic.Engines = append(ic.Engines, ie)
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
