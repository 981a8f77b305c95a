package engines

import (
	"fmt"
	"net/http"
	"strings"
)

// Option is a search option a request may carry, as the honours table names it.
type Option string

// The options every engine kind declares itself on (Capabilities).
const (
	OptRecency        Option = "recency"
	OptAllowedDomains Option = "allowed_domains"
	OptBlockedDomains Option = "blocked_domains"
	OptCountry        Option = "country"
	OptLanguage       Option = "language"
	OptCount          Option = "count"
	OptContextSize    Option = "context_size"
	OptFreshness      Option = "max_age"
)

// AllOptions lists every Option, in the honours table's column order.
var AllOptions = []Option{OptRecency, OptAllowedDomains, OptBlockedDomains, OptCountry, OptLanguage, OptCount, OptContextSize, OptFreshness}

// Treatment is what happens to an option a request carries on a given engine.
type Treatment string

const (
	// Honoured: the engine's provider applies the option.
	Honoured Treatment = "honoured"
	// Applied: the fleet applies it to the returned result (domain filters and the
	// count on the hits; max_age on the cache), exactly.
	Applied Treatment = "applied by the fleet"
	// Weakened: the fleet can apply it only in part (recency on dated hits only):
	// refused when the request is strict, else answered with a warning.
	Weakened Treatment = "weakened (refused when strict, else a warning)"
	// Unsupported: nothing applies it: refused when the request is strict, else
	// answered with a warning naming the engine and the option.
	Unsupported Treatment = "refused when strict, else a warning"
)

// Has reports whether c declares o honoured by the provider.
func (c Capabilities) Has(o Option) bool {
	return map[Option]bool{OptRecency: c.Recency, OptAllowedDomains: c.AllowedDomains, OptBlockedDomains: c.BlockedDomains,
		OptCountry: c.Country, OptLanguage: c.Language, OptCount: c.Count, OptContextSize: c.ContextSize}[o]
}

// TreatmentOf is what an engine with capabilities c does with option o.
func TreatmentOf(c Capabilities, o Option) Treatment {
	switch {
	case o == OptFreshness:
		return Applied // the search worker's cache bounds a result's age
	case c.Has(o):
		return Honoured
	case o == OptAllowedDomains || o == OptBlockedDomains || o == OptCount:
		return Applied
	case o == OptRecency:
		return Weakened
	}
	return Unsupported
}

// carried reports whether q carries option o (a value the engine must act on).
func carried(q Query, o Option) bool {
	return map[Option]bool{OptRecency: q.Recency != "" && q.Recency != NoLimit, OptAllowedDomains: len(q.AllowedDomains) > 0,
		OptBlockedDomains: len(q.BlockedDomains) > 0, OptCountry: q.Country != "", OptLanguage: q.Language != "",
		OptCount: q.Count != 0 && q.Count != DefaultCount, OptContextSize: q.ContextSize != ""}[o]
}

// Unmet are the options q carries that an engine with capabilities c would weaken or
// drop (neither its provider nor the fleet applies them exactly), in AllOptions order.
func Unmet(c Capabilities, q Query) []Option {
	var bad []Option
	for _, o := range AllOptions {
		if t := TreatmentOf(c, o); carried(q, o) && (t == Weakened || t == Unsupported) {
			bad = append(bad, o)
		}
	}
	return bad
}

// refuseStrict is the error of a strict query carrying an option that engine id
// would weaken or drop; nil when there is none.
func refuseStrict(id string, c Capabilities, q Query) error {
	bad := Unmet(c, q)
	if !q.Strict || len(bad) == 0 {
		return nil
	}
	names := make([]string, len(bad))
	for i, o := range bad {
		names[i] = string(o)
	}
	return &Error{Kind: BadRequest, Engine: id, Message: fmt.Sprintf("engine %s cannot honour %s, and the search is strict", id, strings.Join(names, ", "))}
}

// KindCapabilities returns what each engine kind honours as configured by default
// (some kinds' options change it: see each kind's file), by kind.
func KindCapabilities() map[string]Capabilities {
	out := make(map[string]Capabilities, len(kinds))
	for _, k := range Kinds() {
		// What a kind needs to be built at all: an account (Cloudflare).
		cfg := Config{ID: "declared", Kind: k}
		if k == "cloudflare" {
			cfg.Options = []byte(`{"accountId":"declared"}`)
		}
		if c, err := CapabilitiesOf(cfg); err == nil {
			out[k] = c
		}
	}
	return out
}

// CapabilitiesOf is what the engine cfg configures honours (its kind's declaration,
// with its options), without a key or a call.
func CapabilitiesOf(cfg Config) (Capabilities, error) {
	f, ok := kinds[cfg.Kind]
	if !ok {
		return Capabilities{}, fmt.Errorf("unknown engine kind %q", cfg.Kind)
	}
	// A base URL: SearXNG has no public default.
	cfg.APIKey, cfg.APIKeys, cfg.Token, cfg.BaseURL = "declared", nil, nil, "http://declared.invalid"
	e, err := f(cfg, http.DefaultClient)
	if err != nil {
		return Capabilities{}, err
	}
	return capsOf(e), nil
}
