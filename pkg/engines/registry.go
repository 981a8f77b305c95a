package engines

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines/enginecfg"
	"github.com/searchfleet/searchfleet/pkg/provider"
)

// Config configures one engine (enginecfg.Config: the configuration layer builds it
// without depending on the engines themselves).
type Config = enginecfg.Config

// optionsOf decodes c.Options into v, leaving v untouched when there are none.
func optionsOf(c Config, v any) error {
	if len(c.Options) == 0 || string(c.Options) == "null" {
		return nil
	}
	if err := json.Unmarshal(c.Options, v); err != nil {
		return fmt.Errorf("engine %q: options: %w", c.ID, err)
	}
	return nil
}

// priceOf returns the configured cost per search, or def.
func priceOf(c Config, def float64) float64 {
	if c.CostPerSearchUSD != nil {
		return *c.CostPerSearchUSD
	}
	return def
}

// factory builds one engine kind.
type factory func(cfg Config, hc *http.Client) (Engine, error)

// kinds is every engine kind, by wire protocol name.
var kinds = map[string]factory{
	"glm-chat":          newGLMChat,
	"glm-api":           newGLMAPI,
	"gemini":            newGemini,
	"openai":            newOpenAI,
	"anthropic":         newAnthropic,
	"kimi":              newKimi,
	"perplexity":        newPerplexity,
	"perplexity-search": newPerplexitySearch,
	"openrouter":        newOpenRouter,
	"brave":             newBrave,
	"tavily":            newTavily,
	"searxng":           newSearXNG,
	"exa":               newExa,
	"serper":            newSerper,
	"cloudflare":        newCloudflare,
	"parallel":          newParallel,
	"linkup":            newLinkup,
}

// Kinds returns the engine kinds, sorted.
func Kinds() []string { return slices.Sorted(maps.Keys(kinds)) }

// ValidID reports whether id can name an engine (it becomes a subject token).
func ValidID(id string) bool { return enginecfg.ValidID(id) }

// Registry holds the configured engines by id.
type Registry struct {
	byID map[string]Engine
	ids  []string
}

// FromConfig builds every configured engine. hc is shared by all of them (nil means
// http.DefaultClient); set its timeouts and transport there. Keys rotate, but no
// cooldown is remembered between searches (see FromConfigWith).
func FromConfig(cfgs []Config, hc *http.Client) (*Registry, error) {
	return FromConfigWith(cfgs, hc, Options{})
}

// FromConfigWith is FromConfig with shared key cooldowns (see keys.go): an engine
// with several keys, or any engine when o.Cooldowns is set, rotates over its keys and
// rests the ones the provider refuses.
func FromConfigWith(cfgs []Config, hc *http.Client, o Options) (*Registry, error) {
	o.Log = cmp.Or(o.Log, slog.Default())
	r := &Registry{byID: make(map[string]Engine, len(cfgs))}
	dw := NewDeprecationWatch(o.Log, o.Deprecation)
	for _, c := range cfgs {
		if !ValidID(c.ID) {
			return nil, fmt.Errorf("engine id %q: use 1-64 letters, digits, '-' or '_'", c.ID)
		}
		if _, dup := r.byID[c.ID]; dup {
			return nil, fmt.Errorf("engine id %q is configured twice", c.ID)
		}
		f, ok := kinds[c.Kind]
		if !ok {
			return nil, fmt.Errorf("engine %q: unknown kind %q (known: %v)", c.ID, c.Kind, Kinds())
		}
		e, err := build(f, c, dw.Client(hc, c.ID), o)
		if err != nil {
			return nil, err
		}
		r.byID[c.ID] = newNormalized(c.ID, e)
		r.ids = append(r.ids, c.ID)
	}
	return r, nil
}

// build makes one engine: the kind's own; with an access token source, one rebuilt
// per token (tokens.go); with several keys or shared cooldowns, one per key behind
// the rotation of keys.go.
func build(f factory, c Config, hc *http.Client, o Options) (Engine, error) {
	if c.Token != nil {
		return newTokened(f, c, hc)
	}
	keys := c.APIKeys
	if len(keys) == 0 {
		keys = []string{c.APIKey}
	}
	if len(keys) == 1 && o.Cooldowns == nil {
		c.APIKey, c.APIKeys = keys[0], nil
		return f(c, hc)
	}
	k := &keyed{id: c.ID}
	fps := make([]string, 0, len(keys))
	for _, key := range keys {
		ck := c
		ck.APIKey, ck.APIKeys = key, nil
		e, err := f(ck, hc)
		if err != nil {
			return nil, err
		}
		k.per = append(k.per, e)
		fps = append(fps, Fingerprint(key))
	}
	k.keys = provider.NewKeys(c.ID, fps, provider.KeyOptions{Cooldowns: o.Cooldowns, Log: o.Log, KeyEnv: c.APIKeyEnv, Who: "engine"})
	return k, nil
}

// Get returns the engine with the given id.
func (r *Registry) Get(id string) (Engine, bool) {
	e, ok := r.byID[id]
	return e, ok
}

// Resting reports whether every API key of engine id is cooling down (see keys.go),
// and for how long at least: a search there would fail without a request. It is
// false for an unknown engine and when no Cooldowns were given.
func (r *Registry) Resting(ctx context.Context, id string) (time.Duration, bool) {
	n, ok := r.byID[id].(*normalized)
	if !ok {
		return 0, false
	}
	k, ok := n.inner.(*keyed)
	if !ok {
		return 0, false
	}
	return k.keys.RestingFor(ctx)
}

// IDs returns the configured engine ids in configuration order.
func (r *Registry) IDs() []string { return slices.Clone(r.ids) }
