package config

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// Base URLs can come from the environment, so one config file serves every
// environment (a proxy, a staging endpoint, the simulator in deploy/compose/):
//
//	FLEET_PROVIDER_<ID>_BASE_URL         replaces providers.<id>.baseURL
//	FLEET_PROVIDER_<ID>_SEARCH_BASE_URL  replaces providers.<id>.searchBaseURL
//	FLEET_ENGINE_<ID>_BASE_URL           replaces webSearch.engines[…].baseURL of engine <id>
//
// <ID> is the provider name or engine id upper-cased, every character other than a
// letter or digit written as '_' (engine "my-searx" → FLEET_ENGINE_MY_SEARX_BASE_URL).
// Resolve applies them; a set variable must hold an http(s) URL. Keys come from the
// variables the file names (apiKeyEnv), as before.

// EnvID is a provider name or engine id as it appears in an override variable.
func EnvID(id string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(id) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// baseURLOverride is one base URL the environment replaces.
type baseURLOverride struct {
	env   string
	value string
	set   func(f *File, v string)
}

// baseURLOverrides reads the override variables through lookup; it changes nothing.
func (f *File) baseURLOverrides(lookup func(string) (string, bool)) ([]baseURLOverride, error) {
	var out []baseURLOverride
	var errs []error
	add := func(env string, set func(*File, string)) {
		v, ok := lookup(env)
		if v = strings.TrimSpace(v); !ok || v == "" {
			return
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s must be an http(s) URL", env))
			return
		}
		out = append(out, baseURLOverride{env: env, value: v, set: set})
	}
	for _, name := range slices.Sorted(maps.Keys(f.Providers)) {
		add("FLEET_PROVIDER_"+EnvID(name)+"_BASE_URL", func(f *File, v string) {
			p := f.Providers[name]
			p.BaseURL = v
			f.Providers[name] = p
		})
		add("FLEET_PROVIDER_"+EnvID(name)+"_SEARCH_BASE_URL", func(f *File, v string) {
			p := f.Providers[name]
			p.SearchBaseURL = v
			f.Providers[name] = p
		})
	}
	for i, e := range f.WebSearch.Engines {
		add("FLEET_ENGINE_"+EnvID(e.ID)+"_BASE_URL", func(f *File, v string) { f.WebSearch.Engines[i].BaseURL = v })
	}
	return out, errors.Join(errs...)
}
