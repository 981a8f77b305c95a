package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines/enginecfg"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/provider"
	"github.com/searchfleet/searchfleet/pkg/spend"
)

var logWriter = os.Stderr

// File is the providers/models/webSearch configuration file:
//
//	{
//	  "providers": {"glm": {"kind": "glm", "baseURL": "https://open.bigmodel.cn/api/paas/v4", "apiKeyEnv": "ZHIPU_API_KEY"}},
//	  "models":    {"glm-4.7": {"provider": "glm", "model": "glm-4.7"}},
//	  "routing":   {"web_search": [{"id": "web-search-backends", "targets": ["glm.glm-4.7"]}]},
//	  "webSearch": {"engines": [{"id": "glm", "providerKey": "glm.glm-4.7", "description": "…", "default": true}],
//	                "injectPolicy": "selective"}
//	}
type File struct {
	// Providers are upstream APIs by name.
	Providers map[string]Provider `json:"providers"`
	// Models maps the model names clients send to a provider and its model.
	Models map[string]ModelRoute `json:"models"`
	// Routing holds the web_search backend route of the seed.
	Routing Routing `json:"routing"`
	// WebSearch is the seed's webSearch section, extended with per-engine settings.
	WebSearch WebSearch `json:"webSearch"`
	// Tenants map API keys to tenants; with none, the API is open (one tenant).
	Tenants []Tenant `json:"tenants,omitempty"`
	// ResearchAgents are the providers' research agents by name (research_agents.go).
	ResearchAgents map[string]ResearchAgent `json:"researchAgents,omitempty"`
}

// Provider is one upstream API.
type Provider struct {
	// Kind is the provider's protocol family: "openai" (any OpenAI-compatible chat
	// API) for main models; for search it also selects the engine kind of engines
	// that name this provider (glm → glm-chat, gemini → gemini, …).
	Kind string `json:"kind"`
	// BaseURL is the main-model API base: ".../v1" for openai-chat and
	// openai-responses, the host root for anthropic-messages and gemini (as their
	// SDKs take it).
	BaseURL string `json:"baseURL,omitempty"`
	// Protocol is the protocol the provider's main models speak: "openai-chat" (the
	// default), "openai-responses", "anthropic-messages", "gemini" or
	// "perplexity-agent" (the default, and the only one, for kind perplexity; base URL
	// the host root).
	Protocol string `json:"protocol,omitempty"`
	// SearchBaseURL is the base URL search engines of this provider use, when it
	// differs from the engine kind's default.
	SearchBaseURL string `json:"searchBaseURL,omitempty"`
	// APIKeyEnv names the environment variable holding the key.
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// APIKey is the key, filled by Resolve from APIKeyEnv; never serialized.
	APIKey string `json:"-"`
	// APIKeys are the keys when APIKeyEnv holds several, comma-separated (APIKey is
	// then the first); never serialized. Main-model calls rotate over them and rest
	// the ones the provider refuses (provider.Credentials).
	APIKeys []string `json:"-"`
	// AccessToken is an OAuth access token source the main models use instead of an
	// API key (a token file or a refresh command; see AccessToken), sent as a bearer
	// token: for openai-chat, openai-responses and gemini (Vertex AI) providers.
	AccessToken *AccessToken `json:"accessToken,omitempty"`
	// Token is the source Resolve built from AccessToken; never serialized.
	Token provider.TokenSource `json:"-"`
}

// ModelRoute sends a client model name to a provider's model.
type ModelRoute struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// WebSearch is whose search the model's web_search runs: "server" (the fleet's
	// engines, the default), "native" (the provider's own search, where the fleet
	// forwards it: anthropic-messages, openai-responses and gemini providers, and
	// openai-chat providers of kind kimi/moonshot or glm/zhipu) or "auto" (native
	// where supported).
	WebSearch string `json:"webSearch,omitempty"`
	// Pricing is what the model's tokens cost ({"inputPerMTokUSD": 3,
	// "outputPerMTokUSD": 15}): every turn is priced and counted in its tenant's,
	// batch's and request's spend (nil: turns are free).
	Pricing *spend.Pricing `json:"pricing,omitempty"`
	// Reasoning says the model reasons even when a request asks for no reasoning
	// (true) or does not (false); unset, an openai-responses model's name tells
	// (wire.ReasonsUnasked: o-series, gpt-5, codex). The fleet asks such a model for
	// its encrypted reasoning on every call, so each hop can send it back.
	Reasoning *bool `json:"reasoning,omitempty"`
}

// ReasonsUnasked reports whether the model name's model reasons unasked (its route's
// reasoning, else its name).
func (f *File) ReasonsUnasked(name string) bool {
	if r := f.Models[name].Reasoning; r != nil {
		return *r
	}
	return wire.ReasonsUnasked(f.Models[name].Model)
}

// NativeSearch reports whether the model runs the provider's own search.
func (f *File) NativeSearch(name string) bool {
	m := f.Models[name]
	if m.WebSearch != "native" && m.WebSearch != "auto" {
		return false
	}
	p := f.Providers[m.Provider]
	api, ok := upstream.ModelAPIFor(p.Protocol)
	if !ok || api == responses.PerplexityAgent {
		return false // the Agent API's own search is not forwarded
	}
	if api == openaichat.Model {
		api = upstream.ChatModelFor(p.Kind) // Kimi's and GLM's own search
	}
	_, _, ok = api.NativeSearch("")
	return ok
}

// Routing are named routes; only web_search is used.
type Routing struct {
	WebSearch []Route `json:"web_search,omitempty"`
}

// Route lists targets ("provider.model" keys or engine ids).
type Route struct {
	ID       string   `json:"id"`
	Priority int      `json:"priority,omitempty"`
	Targets  []string `json:"targets"`
}

// WebSearch is the seed's section: engines, injectPolicy, opt-in keyword sets.
type WebSearch struct {
	Engines      []EngineEntry `json:"engines"`
	InjectPolicy string        `json:"injectPolicy,omitempty"`
	Keywords     []KeywordSet  `json:"keywords,omitempty"`
	// FetchProvider names the provider whose API reads web_fetch pages instead of the
	// fleet itself: a provider of kind "parallel" (Parallel's Extract API, at its
	// searchBaseURL or baseURL, default https://api.parallel.ai). "": the fleet
	// fetches pages itself, through its SSRF guard.
	FetchProvider string `json:"fetchProvider,omitempty"`
}

// FetchBackend is the web_fetch provider's base URL ("" for its default) and key,
// when WebSearch.FetchProvider names one.
func (f *File) FetchBackend() (baseURL, key string, ok bool) {
	p, ok := f.Providers[f.WebSearch.FetchProvider]
	if !ok {
		return "", "", false
	}
	return cmp.Or(p.SearchBaseURL, p.BaseURL), p.APIKey, true
}

// KeywordSet is an opt-in set of extra intent keywords ("freshness" with no keywords
// selects the built-in set).
type KeywordSet struct {
	Name     string   `json:"name"`
	Keywords []string `json:"keywords,omitempty"`
}

// EngineEntry is one engine: the seed's {id, providerKey, description, default}, or a
// kind for engines without a provider (classic search APIs), plus settings.
type EngineEntry struct {
	ID          string `json:"id"`
	ProviderKey string `json:"providerKey,omitempty"`
	Kind        string `json:"kind,omitempty"`
	Description string `json:"description,omitempty"`
	Default     bool   `json:"default,omitempty"`
	// Languages are the query languages the engine is good at (["zh"] for GLM and
	// Kimi): a call that names no engine goes to one declared for its query's language
	// (intent.Engine.Languages).
	Languages []string `json:"languages,omitempty"`

	// BaseURL, Model and APIKeyEnv override what the provider (or kind) gives.
	BaseURL   string `json:"baseURL,omitempty"`
	Model     string `json:"model,omitempty"`
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// APIKey is the engine's key, filled by Resolve from APIKeyEnv, else from its
	// provider's variable; never serialized.
	APIKey string `json:"-"`
	// APIKeys are the engine's keys when the variable holds several, comma-separated
	// (APIKey is then the first): searches rotate over them; never serialized.
	APIKeys []string `json:"-"`
	// Fallback lists the engines, in order, that take over a search this engine
	// failed with a retryable (429, 5xx, timeout), quota or auth error. Only the
	// engine the model chose follows its list (a fallback's own list is not
	// followed), so lists cannot loop.
	Fallback []string `json:"fallback,omitempty"`
	// AccessToken is an OAuth access token source used instead of an API key (a
	// token file or a refresh command; see AccessToken).
	AccessToken *AccessToken `json:"accessToken,omitempty"`
	// Token is the source Resolve built from AccessToken; never serialized.
	Token provider.TokenSource `json:"-"`
	// Options are the engine kind's options.
	Options json.RawMessage `json:"options,omitempty"`
	// CostPerSearchUSD overrides the kind's list price.
	CostPerSearchUSD *float64 `json:"costPerSearchUSD,omitempty"`
	// RateLimit is shared by every search worker of the engine.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// CacheTTL caches results per normalized query ("0s": off, the default).
	CacheTTL Duration `json:"cacheTTL,omitempty"`
	// CacheShared shares the engine's cache between tenants: a hit answers any
	// tenant's identical search (and so tells it that the search was made). Off, the
	// default, each tenant has its own cache.
	CacheShared bool `json:"cacheShared,omitempty"`
}

// RateLimit is requests per second with a burst.
type RateLimit struct {
	PerSecond float64 `json:"perSecond"`
	Burst     int     `json:"burst,omitempty"`
}

// Tenant is a client of the API.
type Tenant struct {
	ID string `json:"id"`
	// APIKeyEnv names the variable holding the tenant's API key(s), comma-separated.
	APIKeyEnv string `json:"apiKeyEnv"`
	// WebhookSecretEnv names the variable holding the tenant's whsec_ signing secret
	// (a key of at least 24 bytes). To rotate it, the variable holds the new and the
	// old secret separated by a space, newest first: deliveries carry a signature of
	// each until WebhookSecretOverlapUntil, then of the new one only.
	WebhookSecretEnv string `json:"webhookSecretEnv,omitempty"`
	// WebhookSecretOverlapUntil (RFC 3339) ends a rotation's overlap; unset, every
	// secret the variable holds signs.
	WebhookSecretOverlapUntil time.Time `json:"webhookSecretOverlapUntil,omitzero"`
	// Limits are the tenant's own limits; omitted fields take the FLEET_TENANT_*
	// defaults (see Limits).
	Limits Limits `json:"limits,omitzero"`
	// Budget caps the tenant's paid searches per day and month (nil: the default
	// budget of FLEET_TENANT_BUDGET_*).
	Budget *spend.Budget `json:"budget,omitempty"`

	// APIKeys are the tenant's keys, filled by Resolve from APIKeyEnv (split at
	// commas, blanks dropped); never serialized.
	APIKeys []string `json:"-"`
	// WebhookSecret is the signing secret, filled by Resolve from WebhookSecretEnv;
	// never serialized.
	WebhookSecret string `json:"-"`
}

// Duration is a time.Duration written as "30s" in JSON.
type Duration time.Duration

// UnmarshalJSON reads "30s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\" or seconds")
	}
	*d = Duration(n * float64(time.Second))
	return nil
}

// MarshalJSON writes "30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// LoadFile reads and validates a config file, then resolves its secrets from the
// process environment (Resolve with os.LookupEnv): a file loads only when every
// variable it names is set.
func LoadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := ParseFile(b)
	if err == nil {
		err = f.Resolve(os.LookupEnv)
	}
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return f, nil
}

// ParseFile reads and validates a config file's contents; it does not resolve
// secrets (see Resolve). Unknown fields are errors: a misspelt setting must not be
// silently ignored.
func ParseFile(b []byte) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	for name, p := range f.Providers {
		if p.Kind == "perplexity" && p.Protocol == "" {
			p.Protocol = upstream.ModelPerplexityAgent // Sonar's chat completions are retired
			f.Providers[name] = p
		}
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// providerEngineKind maps a provider kind to the engine kind its search uses.
var providerEngineKind = map[string]string{
	"glm": "glm-chat", "zhipu": "glm-chat", "gemini": "gemini", "google": "gemini", "openai": "openai",
	"anthropic": "anthropic", "kimi": "kimi", "moonshot": "kimi", "perplexity": "perplexity", "openrouter": "openrouter",
	"brave": "brave", "tavily": "tavily", "searxng": "searxng", "exa": "exa", "serper": "serper",
}

// SplitProviderKey splits "glm.glm-4.7" into provider "glm" and model "glm-4.7" (the
// model may contain dots; the provider may not).
func SplitProviderKey(k string) (provider, model string) {
	p, m, _ := strings.Cut(k, ".")
	return p, m
}

// Validate checks the file's cross references.
func (f *File) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for name, p := range f.Providers {
		if p.Kind == "" {
			bad("providers.%s.kind is required", name)
		}
		if strings.Contains(name, ".") {
			bad("providers.%s: a provider name cannot contain '.'", name)
		}
		if p.Protocol != "" && !slices.Contains(upstream.ModelProtocols, p.Protocol) {
			bad("providers.%s.protocol %q is not a main-model protocol; use one of %s", name, p.Protocol, strings.Join(upstream.ModelProtocols, ", "))
		}
		if p.AccessToken != nil {
			path := "providers." + name
			p.AccessToken.validate(path, p.APIKeyEnv, bad)
			if p.Protocol == upstream.ModelAnthropicMessages {
				bad("%s.accessToken: anthropic-messages takes an API key (x-api-key), not an access token", path)
			}
		}
	}
	for name, m := range f.Models {
		p, ok := f.Providers[m.Provider]
		switch {
		case !ok:
			bad("models[%q].provider %q is not a configured provider", name, m.Provider)
		case p.Kind == "perplexity" && (p.Protocol == "" || p.Protocol == upstream.ModelOpenAIChat):
			bad("models[%q]: provider %q is Perplexity, whose Sonar chat completions are retired: its models speak the Agent API (protocol %q, the default for kind perplexity)", name, m.Provider, upstream.ModelPerplexityAgent)
		case (p.Protocol == "" || p.Protocol == upstream.ModelOpenAIChat) && p.Kind != "openai" && p.Kind != "glm" && p.Kind != "zhipu" && p.Kind != "kimi" && p.Kind != "moonshot" && p.Kind != "openrouter":
			bad("models[%q]: provider %q has kind %q; main models speak OpenAI chat completions unless the provider sets \"protocol\" (one of %s)", name, m.Provider, p.Kind, strings.Join(upstream.ModelProtocols, ", "))
		case p.BaseURL == "":
			bad("providers.%s.baseURL is required for main-model use (models[%q])", m.Provider, name)
		}
		if m.Model == "" {
			bad("models[%q].model is required", name)
		}
		if m.Pricing != nil {
			if err := m.Pricing.Validate(); err != nil {
				bad("models[%q].pricing: %v", name, err)
			}
		}
		switch m.WebSearch {
		case "", "server", "auto":
		case "native":
			if ok && !f.NativeSearch(name) {
				proto := cmp.Or(p.Protocol, upstream.ModelOpenAIChat)
				bad("models[%q].webSearch \"native\": provider %q speaks %s, whose own search the fleet cannot forward for a provider of kind %q; native search works with anthropic-messages, openai-responses and gemini providers and openai-chat providers of kind kimi, moonshot, glm or zhipu; use \"server\" or \"auto\"", name, m.Provider, proto, p.Kind)
			}
		default:
			bad("models[%q].webSearch %q must be server, native or auto", name, m.WebSearch)
		}
	}
	if _, err := f.EngineConfigs(); err != nil {
		errs = append(errs, err)
	}
	switch f.WebSearch.InjectPolicy {
	case "", "selective", "always":
	default:
		bad("webSearch.injectPolicy must be \"selective\" or \"always\"")
	}
	defaults := 0
	seen := map[string]bool{}
	targets := f.webSearchTargets()
	for i, e := range f.WebSearch.Engines {
		path := fmt.Sprintf("webSearch.engines[%d]", i)
		if !enginecfg.ValidID(e.ID) {
			bad("%s.id %q: use 1-64 letters, digits, '-' or '_'", path, e.ID)
		}
		if seen[e.ID] {
			bad("%s.id %q is used twice", path, e.ID)
		}
		seen[e.ID] = true
		if e.Default {
			defaults++
		}
		if e.ProviderKey != "" && !slices.Contains(targets, e.ProviderKey) && !slices.Contains(targets, e.ID) {
			bad("%s.providerKey %q is not a target of routing.web_search (targets: %v)", path, e.ProviderKey, targets)
		}
		if e.RateLimit != nil && e.RateLimit.PerSecond <= 0 {
			bad("%s.rateLimit.perSecond must be positive", path)
		}
		if e.AccessToken != nil {
			e.AccessToken.validate(path, e.APIKeyEnv, bad)
		}
		for j, fb := range e.Fallback {
			switch _, ok := f.Engine(fb); {
			case fb == e.ID:
				bad("%s.fallback[%d]: engine %q cannot fall back to itself", path, j, fb)
			case !ok:
				bad("%s.fallback[%d]: %q is not a configured engine", path, j, fb)
			case slices.Contains(e.Fallback[:j], fb):
				bad("%s.fallback[%d]: %q is listed twice", path, j, fb)
			}
		}
	}
	if defaults > 1 {
		bad("webSearch.engines: at most one engine may be the default (%d are)", defaults)
	}
	if name := f.WebSearch.FetchProvider; name != "" && f.Providers[name].Kind != "parallel" {
		bad("webSearch.fetchProvider %q must name a provider of kind parallel (Parallel's Extract API)", name)
	}
	f.validateResearchAgents(bad)
	for i, t := range f.Tenants {
		if !t.WebhookSecretOverlapUntil.IsZero() && t.WebhookSecretEnv == "" {
			bad("tenants[%d].webhookSecretOverlapUntil needs webhookSecretEnv", i)
		}
		if t.ID == "" || t.APIKeyEnv == "" {
			bad("tenants[%d] needs id and apiKeyEnv", i)
		}
		if strings.Contains(t.ID, "*") {
			bad("tenants[%d].id %q: a tenant id cannot contain '*' (it stands for all tenants in a shared search cache)", i, t.ID)
		}
		if t.Budget != nil {
			if err := t.Budget.Validate(); err != nil {
				bad("tenants[%d].budget: %v", i, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (f *File) webSearchTargets() []string {
	var out []string
	for _, r := range f.Routing.WebSearch {
		out = append(out, r.Targets...)
	}
	return out
}

// EngineConfigs resolves webSearch.engines into engine configurations: an engine
// names a provider by providerKey ("glm.glm-4.7": provider glm, model glm-4.7), whose
// kind, search base URL and key variable it inherits, or a kind directly. Each config
// carries the key Resolve found for the engine (empty before Resolve).
func (f *File) EngineConfigs() ([]enginecfg.Config, error) {
	var out []enginecfg.Config
	var errs []error
	for i, e := range f.WebSearch.Engines {
		path := fmt.Sprintf("webSearch.engines[%d]", i)
		c := enginecfg.Config{ID: e.ID, Kind: e.Kind, BaseURL: e.BaseURL, Model: e.Model, APIKeyEnv: e.APIKeyEnv, APIKey: e.APIKey, APIKeys: e.APIKeys, Token: e.Token, Options: e.Options, CostPerSearchUSD: e.CostPerSearchUSD}
		if e.ProviderKey != "" {
			pname, model := SplitProviderKey(e.ProviderKey)
			p, ok := f.Providers[pname]
			if !ok {
				errs = append(errs, fmt.Errorf("%s.providerKey %q: no provider %q", path, e.ProviderKey, pname))
				continue
			}
			c.Kind = cmp.Or(c.Kind, providerEngineKind[p.Kind])
			c.Model = cmp.Or(c.Model, model)
			c.BaseURL = cmp.Or(c.BaseURL, p.SearchBaseURL)
			c.APIKeyEnv = cmp.Or(c.APIKeyEnv, p.APIKeyEnv)
			if c.APIKey == "" && e.APIKeyEnv == "" && e.AccessToken == nil {
				c.APIKey, c.APIKeys = p.APIKey, p.APIKeys
			}
		}
		if c.Kind == "" {
			errs = append(errs, fmt.Errorf("%s: give providerKey or kind", path))
			continue
		}
		if !slices.Contains(enginecfg.Kinds, c.Kind) {
			errs = append(errs, fmt.Errorf("%s.kind %q is not an engine kind (%s)", path, c.Kind, strings.Join(enginecfg.Kinds, ", ")))
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// Engine returns the entry of an engine id.
func (f *File) Engine(id string) (EngineEntry, bool) {
	for _, e := range f.WebSearch.Engines {
		if e.ID == id {
			return e, true
		}
	}
	return EngineEntry{}, false
}

// ModelNames returns the configured client model names, sorted.
func (f *File) ModelNames() []string {
	out := slices.AppendSeq(make([]string, 0, len(f.Models)), maps.Keys(f.Models))
	slices.Sort(out)
	return out
}

// KeyEnvs lists every environment variable the file names for a secret, sorted, for
// the start-up log line (names only, never values).
func (f *File) KeyEnvs() []string {
	var out []string
	for _, n := range f.secretNeeds() {
		out = append(out, n.env)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Budgets returns the tenants' spend budgets: each tenant's own, else def.
func (f *File) Budgets(def spend.Budget) *spend.Budgets {
	b := &spend.Budgets{ByTenant: map[string]spend.Budget{}, Default: def}
	for _, t := range f.Tenants {
		if t.Budget != nil {
			b.ByTenant[t.ID] = *t.Budget
		}
	}
	return b
}
