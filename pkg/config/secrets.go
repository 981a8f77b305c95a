package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// Resolve reads every secret the file names through lookup (os.LookupEnv in a
// process, MapLookup in tests and for configs built in code) and fills the fields
// that hold them, none of which is ever serialized:
//
//   - Provider.APIKey from the provider's apiKeyEnv (and APIKeys, when it holds
//     several comma-separated keys: APIKey is then the first);
//   - EngineEntry.APIKey and APIKeys the same way, from the engine's apiKeyEnv, else
//     its provider's;
//   - Provider.Token and EngineEntry.Token from accessToken (its file must read to a token, its
//     command's program must exist; the token itself is read per search);
//   - Tenant.APIKeys from apiKeyEnv (a comma-separated list);
//   - Tenant.WebhookSecret from webhookSecretEnv;
//
// and applies the base URLs the environment sets (overrides.go).
//
// Every variable named is required: one that is unset or empty (for a tenant's keys:
// holds no key) is missing. Resolve checks them all and reports every missing
// variable in one *MissingSecretsError, so an operator fixes the environment in one
// go. Errors name variables and what needs them, never a value. On error the file is
// left unchanged. Values are trimmed of surrounding white space (a key read from a
// file often ends in a newline).
//
// This is the only place secrets are read: engines, tenants, webhooks and main
// models use the resolved fields.
func (f *File) Resolve(lookup func(string) (string, bool)) error {
	values := map[string]string{}
	missing := map[string][]string{}
	for _, n := range f.secretNeeds() {
		v, _ := lookup(n.env)
		v = strings.TrimSpace(v)
		if v == "" || (n.list && len(splitKeys(v)) == 0) {
			missing[n.env] = append(missing[n.env], n.what)
			continue
		}
		values[n.env] = v
	}
	overrides, err := f.baseURLOverrides(lookup)
	if len(missing) > 0 {
		if err != nil {
			return errors.Join(&MissingSecretsError{NeededBy: missing}, err)
		}
		return &MissingSecretsError{NeededBy: missing}
	}
	tokens := make([]provider.TokenSource, len(f.WebSearch.Engines))
	var terrs []error
	for i, e := range f.WebSearch.Engines {
		if e.AccessToken != nil {
			var err error
			if tokens[i], err = e.AccessToken.source(fmt.Sprintf("webSearch.engines[%d]", i)); err != nil {
				terrs = append(terrs, err)
			}
		}
	}
	ptokens := map[string]provider.TokenSource{}
	for _, name := range slices.Sorted(maps.Keys(f.Providers)) {
		if p := f.Providers[name]; p.AccessToken != nil {
			tok, err := p.AccessToken.source("providers." + name)
			if err != nil {
				terrs = append(terrs, err)
			}
			ptokens[name] = tok
		}
	}
	if len(terrs) > 0 {
		return errors.Join(terrs...)
	}
	if err != nil {
		return err
	}
	for _, o := range overrides {
		o.set(f, o.value)
	}
	for name, p := range f.Providers {
		p.APIKey, p.APIKeys = keyList(values[p.APIKeyEnv])
		p.Token = ptokens[name]
		f.Providers[name] = p
	}
	for i := range f.WebSearch.Engines {
		e := &f.WebSearch.Engines[i]
		e.APIKey, e.APIKeys = keyList(values[f.engineKeyEnv(*e)])
		e.Token = tokens[i]
	}
	for i := range f.Tenants {
		t := &f.Tenants[i]
		t.APIKeys = splitKeys(values[t.APIKeyEnv])
		t.WebhookSecret = values[t.WebhookSecretEnv]
	}
	for name, ra := range f.ResearchAgents {
		ra.WebhookSecret = values[ra.WebhookSecretEnv]
		f.ResearchAgents[name] = ra
	}
	return nil
}

// MapLookup is a lookup for Resolve that reads m instead of the environment.
func MapLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// MissingSecretsError is Resolve's error: the secret variables that are unset or
// empty, each with what needs it. It holds no values.
type MissingSecretsError struct {
	// NeededBy maps each missing variable to the config paths that need it.
	NeededBy map[string][]string
}

// Vars returns the missing variables, sorted.
func (e *MissingSecretsError) Vars() []string { return slices.Sorted(maps.Keys(e.NeededBy)) }

// Error lists every missing variable on one line, sorted:
//
//	2 secret variables are unset or empty: GEMINI_API_KEY (needed by providers.gemini,
//	webSearch.engines[1] "google" through providers.gemini); ZHIPU_API_KEY (…)
func (e *MissingSecretsError) Error() string {
	var b strings.Builder
	vars := e.Vars()
	if len(vars) == 1 {
		b.WriteString("1 secret variable is unset or empty: ")
	} else {
		fmt.Fprintf(&b, "%d secret variables are unset or empty: ", len(vars))
	}
	for i, v := range vars {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (needed by %s)", v, strings.Join(e.NeededBy[v], ", "))
	}
	return b.String()
}

// secretNeed is one use of a secret variable.
type secretNeed struct {
	env  string // the variable
	what string // what needs it, as a config path
	list bool   // a comma-separated list that must hold at least one item
}

// secretNeeds lists every use of a secret variable in a stable order: providers by
// name, then engines and tenants in file order.
func (f *File) secretNeeds() []secretNeed {
	var out []secretNeed
	for _, name := range slices.Sorted(maps.Keys(f.Providers)) {
		if env := f.Providers[name].APIKeyEnv; env != "" {
			out = append(out, secretNeed{env: env, what: "providers." + name})
		}
	}
	for i, e := range f.WebSearch.Engines {
		env := f.engineKeyEnv(e)
		if env == "" || e.AccessToken != nil {
			continue // an engine with an access token needs no key
		}
		what := fmt.Sprintf("webSearch.engines[%d] %q", i, e.ID)
		if e.APIKeyEnv == "" {
			p, _ := SplitProviderKey(e.ProviderKey)
			what += " through providers." + p
		}
		out = append(out, secretNeed{env: env, what: what})
	}
	for i, t := range f.Tenants {
		if t.APIKeyEnv != "" {
			out = append(out, secretNeed{env: t.APIKeyEnv, what: fmt.Sprintf("tenants[%d] %q API keys", i, t.ID), list: true})
		}
		if t.WebhookSecretEnv != "" {
			out = append(out, secretNeed{env: t.WebhookSecretEnv, what: fmt.Sprintf("tenants[%d] %q webhook secret", i, t.ID)})
		}
	}
	for _, name := range f.ResearchAgentNames() {
		if env := f.ResearchAgents[name].WebhookSecretEnv; env != "" {
			out = append(out, secretNeed{env: env, what: fmt.Sprintf("researchAgents[%q] webhook secret", name)})
		}
	}
	return out
}

// engineKeyEnv is the variable holding an engine's key: its own, else its provider's.
func (f *File) engineKeyEnv(e EngineEntry) string {
	if e.APIKeyEnv != "" || e.ProviderKey == "" {
		return e.APIKeyEnv
	}
	p, _ := SplitProviderKey(e.ProviderKey)
	return f.Providers[p].APIKeyEnv
}

// keyList reads a key variable's value: one key, or several comma-separated ones.
// It returns the first key, and every key when there are several (nil for one).
func keyList(v string) (string, []string) {
	keys := splitKeys(v)
	switch len(keys) {
	case 0:
		return "", nil
	case 1:
		return keys[0], nil
	}
	return keys[0], keys
}

// splitKeys splits a comma-separated list of keys, dropping blanks.
func splitKeys(v string) []string {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}
