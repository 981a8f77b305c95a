package intent

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Injection policies (config webSearch.injectPolicy).
const (
	// PolicySelective offers web_search only when the latest user message asks for a
	// search or the chain is sticky. It is the default: a tool the model does not
	// need costs prompt tokens on every call and invites needless searches.
	PolicySelective = "selective"
	// PolicyAlways offers web_search on every main-model call.
	PolicyAlways = "always"
)

// Engine is one entry of the config's webSearch.engines: an id the main model can
// name, and the backend that runs it.
type Engine struct {
	// ID is what the model passes as the engine argument and the token in the
	// fleet.search.v1.<engine> subject: 1-64 letters, digits, '-' or '_'.
	ID string `json:"id"`
	// ProviderKey names the search backend as a target of routing.web_search
	// ("glm.glm-4.7", "antigravity.x.gemini-3-flash").
	ProviderKey string `json:"providerKey,omitempty"`
	// Kind is the engine kind (one of engines.Kinds()). The config loader sets it
	// from the provider when ProviderKey is used; a classic search API (Brave,
	// Tavily, …) has only a Kind.
	Kind string `json:"kind,omitempty"`
	// Description tells the model what the engine is good at; it is shown in the
	// tool schema as "id=description".
	Description string `json:"description,omitempty"`
	// Default makes this engine the one used when a call names none. At most one
	// engine is the default; a single engine is the default implicitly.
	Default bool `json:"default,omitempty"`
	// Languages are the query languages the engine is good at, as lower-case ISO
	// 639-1 codes (GLM and Kimi: ["zh"]). None means any. When a call names no engine,
	// a query in a language the default engine does not declare goes to an engine that
	// declares it (QueryLanguage says which languages are told apart).
	Languages []string `json:"languages,omitempty"`
	// Honours is what the engine applies of a search's options (engines.CapabilitiesOf
	// its configuration); nil when unknown. When the fleet chooses a call's engine, it
	// passes over one that would weaken an option the search carries (Toolset.Route).
	Honours *engines.Capabilities `json:"-"`
}

// GoogleBacked reports whether e searches with Google: Kind "gemini", or a
// ProviderKey of the Gemini CLI ("gemini-cli.…") or Antigravity ("antigravity.…")
// backends or naming a Gemini model ("….gemini…"), or an id that contains "google"
// in any case (seed 000: configs that encode Google in the id). These are the engines
// a Google-preferred request is narrowed to.
func GoogleBacked(e Engine) bool {
	return e.Kind == "gemini" ||
		strings.HasPrefix(e.ProviderKey, "gemini-cli.") ||
		strings.HasPrefix(e.ProviderKey, "antigravity.") ||
		strings.Contains(e.ProviderKey, ".gemini") ||
		strings.Contains(strings.ToLower(e.ID), "google")
}

// Config is the config file's webSearch section (seed 000, "Web Search Engines").
type Config struct {
	// Engines are the engines the main model can choose from, in the order the
	// tool schema lists them.
	Engines []Engine `json:"engines"`
	// InjectPolicy is PolicySelective (the default when empty) or PolicyAlways.
	InjectPolicy string `json:"injectPolicy"`
	// Keywords are opt-in keyword sets for the classifier, tried when no built-in
	// rule fires. A set named FreshnessName with no keywords is the built-in
	// Freshness set: {"name": "freshness"}.
	Keywords []KeywordSet `json:"keywords,omitempty"`
}

// Validate checks c against the targets of routing.web_search (the search backend
// route), and reports every problem at once, each naming its JSON path
// ("webSearch.engines[1].providerKey: …"). The rules: at least one engine; ids valid
// and unique; at most one default; every engine has a providerKey or a kind; a kind
// is one of engines.Kinds(); every providerKey is a target of routing.web_search;
// injectPolicy is selective, always or empty; keyword sets are named, unique and not
// empty.
func (c Config) Validate(webSearchRoute []string) error {
	return c.validate(webSearchRoute, true)
}

// validate is Validate, with the route check optional: NewToolset does not know the
// route.
func (c Config) validate(route []string, checkRoute bool) error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("webSearch.%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if len(c.Engines) == 0 {
		bad("engines", "at least one engine is required")
	}
	seen := make(map[string]int, len(c.Engines))
	def := -1
	kinds := engines.Kinds()
	for i, e := range c.Engines {
		at := fmt.Sprintf("engines[%d]", i)
		if !engines.ValidID(e.ID) {
			bad(at+".id", "%q is not a valid engine id: use 1-64 letters, digits, '-' or '_'", e.ID)
		} else if j, dup := seen[e.ID]; dup {
			bad(at+".id", "%q is already the id of webSearch.engines[%d]", e.ID, j)
		} else {
			seen[e.ID] = i
		}
		if e.Default {
			if def >= 0 {
				bad(at+".default", "only one engine can be the default; webSearch.engines[%d] (%q) already is", def, c.Engines[def].ID)
			} else {
				def = i
			}
		}
		for j, l := range e.Languages {
			if !slices.Contains(knownLanguages, l) {
				bad(fmt.Sprintf("%s.languages[%d]", at, j), "%q is not a language the fleet tells apart (%s)", l, strings.Join(knownLanguages, ", "))
			}
		}
		if e.ProviderKey == "" && e.Kind == "" {
			bad(at, "engine %q needs a providerKey (a target of routing.web_search) or a kind (one of %s)", e.ID, strings.Join(kinds, ", "))
		}
		if e.Kind != "" && !slices.Contains(kinds, e.Kind) {
			bad(at+".kind", "unknown engine kind %q (known: %s)", e.Kind, strings.Join(kinds, ", "))
		}
		if checkRoute && e.ProviderKey != "" && !slices.Contains(route, e.ProviderKey) {
			if len(route) == 0 {
				bad(at+".providerKey", "engine %q uses %q, but routing.web_search has no targets", e.ID, e.ProviderKey)
			} else {
				bad(at+".providerKey", "engine %q uses %q, which is not a target of routing.web_search (%s)", e.ID, e.ProviderKey, strings.Join(route, ", "))
			}
		}
	}
	switch c.InjectPolicy {
	case "", PolicySelective, PolicyAlways:
	default:
		bad("injectPolicy", "%q is not one of %s, %s", c.InjectPolicy, PolicySelective, PolicyAlways)
	}
	names := make(map[string]int, len(c.Keywords))
	for i, ks := range c.Keywords {
		at := fmt.Sprintf("keywords[%d]", i)
		switch j, dup := names[ks.Name]; {
		case strings.TrimSpace(ks.Name) == "":
			bad(at+".name", "a keyword set needs a name")
		case dup:
			bad(at+".name", "%q is already the name of webSearch.keywords[%d]", ks.Name, j)
		default:
			names[ks.Name] = i
		}
		if len(ks.Keywords) == 0 && ks.Name != FreshnessName {
			bad(at+".keywords", "set %q has no keywords (only %q may omit them, meaning the built-in set)", ks.Name, FreshnessName)
		}
		for k, kw := range ks.Keywords {
			if strings.TrimSpace(kw) == "" {
				bad(fmt.Sprintf("%s.keywords[%d]", at, k), "empty keyword: it would match nothing")
			}
		}
	}
	return errors.Join(errs...)
}

// policy returns the effective injection policy.
func (c Config) policy() string {
	if c.InjectPolicy == "" {
		return PolicySelective
	}
	return c.InjectPolicy
}
