package config_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// exampleSecrets are values for every variable config/example.json names.
var exampleSecrets = map[string]string{
	"OPENAI_API_KEY": "sk-openai-VALUE", "ZHIPU_API_KEY": "zhipu-VALUE", "DEEPSEEK_API_KEY": "sk-deepseek-VALUE",
	"GEMINI_API_KEY": "gemini-VALUE", "BRAVE_API_KEY": "brave-VALUE", "TAVILY_API_KEY": "tvly-VALUE",
	"ACME_API_KEYS": "acme-one-VALUE, acme-two-VALUE", "ACME_WEBHOOK_SECRET": "whsec_acme-VALUE",
}

// acme is a tenant the tests add to the example (which ships without tenants, so it
// starts with provider keys alone).
var acme = config.Tenant{ID: "acme", APIKeyEnv: "ACME_API_KEYS", WebhookSecretEnv: "ACME_WEBHOOK_SECRET"}

// parseExampleWithTenant is the example with the acme tenant added.
func parseExampleWithTenant(t *testing.T) *config.File {
	t.Helper()
	f := parseExample(t)
	f.Tenants = append(f.Tenants, acme)
	return f
}

func parseExample(t *testing.T) *config.File {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "example.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.ParseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The example in config/ is what operators copy: it must load, resolve every engine
// and secret, and build every engine kind it names.
func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()
	f := parseExampleWithTenant(t)
	if err := f.Resolve(config.MapLookup(exampleSecrets)); err != nil {
		t.Fatal(err)
	}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, c := range cfgs {
		kinds[c.ID] = c.Kind + "/" + c.Model + "/" + c.APIKeyEnv + "/" + c.APIKey
	}
	if kinds["glm"] != "glm-chat/glm-4.7/ZHIPU_API_KEY/zhipu-VALUE" || kinds["google"] != "gemini/gemini-2.5-flash/GEMINI_API_KEY/gemini-VALUE" ||
		kinds["brave"] != "brave//BRAVE_API_KEY/brave-VALUE" || kinds["searxng"] != "searxng///" {
		t.Errorf("resolved engines: %v", kinds)
	}
	if _, err := engines.FromConfig(cfgs, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.KeyEnvs(), ","); got != "ACME_API_KEYS,ACME_WEBHOOK_SECRET,BRAVE_API_KEY,DEEPSEEK_API_KEY,GEMINI_API_KEY,OPENAI_API_KEY,TAVILY_API_KEY,ZHIPU_API_KEY" {
		t.Errorf("key variables %s", got)
	}
}

// Resolve fills every secret field: provider keys, engine keys (an engine's own
// variable, else its provider's), tenant key lists and webhook secrets; and none of
// them is in the file's JSON encoding.
func TestResolveFillsEverySecret(t *testing.T) {
	t.Parallel()
	f := parseExampleWithTenant(t)
	if err := f.Resolve(config.MapLookup(exampleSecrets)); err != nil {
		t.Fatal(err)
	}
	if got := f.Providers["openai"].APIKey; got != "sk-openai-VALUE" {
		t.Errorf("providers.openai key %q", got)
	}
	for id, want := range map[string]string{"glm": "zhipu-VALUE", "google": "gemini-VALUE", "brave": "brave-VALUE", "searxng": ""} {
		if e, _ := f.Engine(id); e.APIKey != want {
			t.Errorf("engine %s key %q, want %q", id, e.APIKey, want)
		}
	}
	acme := f.Tenants[0]
	if strings.Join(acme.APIKeys, "|") != "acme-one-VALUE|acme-two-VALUE" || acme.WebhookSecret != "whsec_acme-VALUE" {
		t.Errorf("tenant %+v", acme)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "VALUE") || !strings.Contains(string(b), "ZHIPU_API_KEY") {
		t.Errorf("JSON encoding holds a secret or lost a variable name:\n%s", b)
	}
}

// An engine's own apiKeyEnv overrides its provider's; without one it takes the
// provider's key.
func TestResolveEngineKeyFallsBackToProvider(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{
	  "providers": {"glm": {"kind": "glm", "apiKeyEnv": "P_KEY"}},
	  "routing":   {"web_search": [{"id": "r", "targets": ["glm.glm-4.7"]}]},
	  "webSearch": {"engines": [
	    {"id": "inherits", "providerKey": "glm.glm-4.7"},
	    {"id": "own", "providerKey": "glm.glm-4.7", "apiKeyEnv": "E_KEY"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Resolve(config.MapLookup(map[string]string{"P_KEY": "provider-key", "E_KEY": "engine-key"})); err != nil {
		t.Fatal(err)
	}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if cfgs[0].APIKey != "provider-key" || cfgs[0].APIKeyEnv != "P_KEY" || cfgs[1].APIKey != "engine-key" || cfgs[1].APIKeyEnv != "E_KEY" {
		t.Errorf("engine keys: %s=%q %s=%q", cfgs[0].APIKeyEnv, cfgs[0].APIKey, cfgs[1].APIKeyEnv, cfgs[1].APIKey)
	}
}

// A key variable holding several comma-separated keys gives an engine (and an engine
// that inherits its provider's variable) every key, in order; one key stays one key.
func TestResolveKeyLists(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{
	  "providers": {"glm": {"kind": "glm", "apiKeyEnv": "P_KEYS"}},
	  "routing":   {"web_search": [{"id": "r", "targets": ["glm.glm-4.7"]}]},
	  "webSearch": {"engines": [
	    {"id": "inherits", "providerKey": "glm.glm-4.7"},
	    {"id": "brave", "kind": "brave", "apiKeyEnv": "B_KEYS", "fallback": ["tavily", "inherits"]},
	    {"id": "tavily", "kind": "tavily", "apiKeyEnv": "T_KEY"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Resolve(config.MapLookup(map[string]string{"P_KEYS": "p1,p2", "B_KEYS": " b1 , b2,, b3\n", "T_KEY": "t1"})); err != nil {
		t.Fatal(err)
	}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		t.Fatal(err)
	}
	got := func(c engines.Config) string { return c.APIKey + "|" + strings.Join(c.APIKeys, ",") }
	if g := got(cfgs[0]); g != "p1|p1,p2" {
		t.Errorf("inherited keys = %s", g)
	}
	if g := got(cfgs[1]); g != "b1|b1,b2,b3" {
		t.Errorf("engine keys = %s", g)
	}
	if g := got(cfgs[2]); g != "t1|" {
		t.Errorf("single key = %s", g)
	}
	if f.Providers["glm"].APIKey != "p1" {
		t.Errorf("provider key = %q, want the first of the list", f.Providers["glm"].APIKey)
	}
	if e, _ := f.Engine("brave"); strings.Join(e.Fallback, ",") != "tavily,inherits" {
		t.Errorf("fallback = %v", e.Fallback)
	}
	if _, err := engines.FromConfig(cfgs, nil); err != nil {
		t.Fatal(err)
	}
}

// The example as shipped, with no variable set, fails with one error listing every
// missing variable, sorted, each with what needs it; with the tenant's secrets set,
// the same error lists exactly the provider keys. Values never appear, and a failed
// Resolve changes nothing.
func TestResolveListsEveryMissingVariable(t *testing.T) {
	t.Parallel()
	f := parseExampleWithTenant(t)
	err := f.Resolve(config.MapLookup(nil))
	var missing *config.MissingSecretsError
	if !errors.As(err, &missing) {
		t.Fatalf("error %v, want a *MissingSecretsError", err)
	}
	if got := strings.Join(missing.Vars(), ","); got != strings.Join(f.KeyEnvs(), ",") {
		t.Errorf("missing %s, want every variable %v", got, f.KeyEnvs())
	}
	msg := err.Error()
	for _, want := range []string{
		"8 secret variables are unset or empty",
		`GEMINI_API_KEY (needed by providers.gemini, webSearch.engines[1] "google" through providers.gemini)`,
		`BRAVE_API_KEY (needed by providers.brave, webSearch.engines[2] "brave")`,
		`ACME_API_KEYS (needed by tenants[0] "acme" API keys)`,
		`ACME_WEBHOOK_SECRET (needed by tenants[0] "acme" webhook secret)`,
		"OPENAI_API_KEY (needed by providers.openai)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if i, j := strings.Index(msg, "ACME_API_KEYS"), strings.Index(msg, "ZHIPU_API_KEY"); i < 0 || j < i {
		t.Errorf("variables not sorted:\n%s", msg)
	}

	// Only provider keys missing; the set values (and blanks) stay out of the error.
	partial := map[string]string{"ACME_API_KEYS": "acme-VALUE", "ACME_WEBHOOK_SECRET": "whsec_VALUE", "OPENAI_API_KEY": "  "}
	err = f.Resolve(config.MapLookup(partial))
	if !errors.As(err, &missing) {
		t.Fatalf("error %v", err)
	}
	if got := strings.Join(missing.Vars(), ","); got != "BRAVE_API_KEY,DEEPSEEK_API_KEY,GEMINI_API_KEY,OPENAI_API_KEY,TAVILY_API_KEY,ZHIPU_API_KEY" {
		t.Errorf("missing %s", got)
	}
	if strings.Contains(err.Error(), "VALUE") {
		t.Errorf("a value is in the error: %v", err)
	}
	if len(f.Tenants[0].APIKeys) != 0 || f.Tenants[0].WebhookSecret != "" {
		t.Errorf("a failed Resolve filled the tenant: %+v", f.Tenants[0])
	}

	// A key list with no key in it is missing too.
	tf, _ := config.ParseFile([]byte(`{"tenants":[{"id":"t","apiKeyEnv":"T_KEYS"}]}`))
	if err := tf.Resolve(config.MapLookup(map[string]string{"T_KEYS": " , "})); err == nil || !strings.Contains(err.Error(), "T_KEYS") {
		t.Errorf("blank key list: %v", err)
	}
}

func TestFileValidation(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"providers":{"p":{"kind":"openai","baseURL":"http://x"}},"models":{"m":{"provider":"nope","model":"x"}}}`:      `models["m"].provider "nope"`,
		`{"providers":{"p":{"kind":"openai"}},"models":{"m":{"provider":"p","model":"x"}}}`:                              `providers.p.baseURL is required`,
		`{"providers":{"g":{"kind":"glm"}},"webSearch":{"engines":[{"id":"glm","providerKey":"g.glm-4.7"}]}}`:            `is not a target of routing.web_search`,
		`{"webSearch":{"engines":[{"id":"a b","kind":"brave"}]}}`:                                                        `webSearch.engines[0].id "a b"`,
		`{"webSearch":{"engines":[{"id":"a","kind":"brave","default":true},{"id":"b","kind":"tavily","default":true}]}}`: `at most one engine may be the default`,
		`{"webSearch":{"engines":[{"id":"a","kind":"bing"}]}}`:                                                           `kind "bing" is not an engine kind`,
		`{"webSearch":{"engines":[{"id":"a","kind":"brave"}],"injectPolicy":"sometimes"}}`:                               `injectPolicy`,
		`{"webSearch":{"engines":[{"id":"a","kind":"brave","rateLimit":{"perSecond":0}}]}}`:                              `rateLimit.perSecond must be positive`,
		`{"webSearch":{"enginez":[]}}`:                                                                          `unknown field "enginez"`,
		`{"webSearch":{"engines":[{"id":"a","kind":"brave","fallback":["a"]}]}}`:                                `webSearch.engines[0].fallback[0]: engine "a" cannot fall back to itself`,
		`{"webSearch":{"engines":[{"id":"a","kind":"brave","fallback":["bing"]}]}}`:                             `webSearch.engines[0].fallback[0]: "bing" is not a configured engine`,
		`{"webSearch":{"engines":[{"id":"a","kind":"brave","fallback":["b","b"]},{"id":"b","kind":"tavily"}]}}`: `webSearch.engines[0].fallback[1]: "b" is listed twice`,
	}
	for in, want := range cases {
		_, err := config.ParseFile([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n  error %v, want it to mention %q", in, err, want)
		}
	}
}

// Env errors name the variable to fix.
func TestEnvValidationNamesVariables(t *testing.T) {
	t.Parallel()
	e := config.Env{AckWait: time.Second, EngineTimeout: time.Hour, ModelTimeout: time.Minute, JobTimeout: 5 * time.Minute,
		MaxHops: 0, ChatConcurrency: 0, BatchConcurrency: 1, SearchConcurrency: 1, MaxBodyBytes: 10, Retention: time.Hour,
		LogFormat: "xml", LogLevel: "loud", WebhookAllow: []string{"not-a-cidr"}, RedisURL: "http://x"}
	err := e.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, v := range []string{"FLEET_ACK_WAIT", "FLEET_ENGINE_TIMEOUT", "FLEET_MAX_HOPS", "FLEET_CHAT_CONCURRENCY", "FLEET_MAX_BODY_BYTES",
		"FLEET_LOG_FORMAT", "FLEET_LOG_LEVEL", "FLEET_WEBHOOK_ALLOW", "FLEET_WEBHOOK_SCHEDULE", "REDIS_URL"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error does not name %s:\n%v", v, err)
		}
	}
}

// The defaults parse and validate, and the logged form hides credentials.
func TestEnvDefaultsAndRedaction(t *testing.T) {
	t.Parallel()
	e, err := config.LoadEnvFrom(map[string]string{
		"REDIS_URL": "redis://user:s3cret-pass@redis.internal:6379/0",
		"NATS_URL":  "nats://token:nats-secret@nats.internal:4222",
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.HTTPAddr != "127.0.0.1:8080" || e.MaxHops != 6 || len(e.WebhookSchedule) != 8 {
		t.Errorf("defaults %+v", e)
	}
	logged := e.LogValue().String()
	if strings.Contains(logged, "s3cret-pass") || strings.Contains(logged, "nats-secret") || !strings.Contains(logged, "redis.internal") {
		t.Errorf("logged settings: %s", logged)
	}
}

// config/example.json as shipped needs nothing but the provider keys: with an empty
// environment, one error lists exactly the variables its providers name, and with
// those set it resolves.
func TestExampleNeedsOnlyProviderKeys(t *testing.T) {
	t.Parallel()
	f := parseExample(t)
	err := f.Resolve(config.MapLookup(nil))
	var missing *config.MissingSecretsError
	if !errors.As(err, &missing) {
		t.Fatalf("error %v, want a *MissingSecretsError", err)
	}
	var providerKeys []string
	for _, p := range f.Providers {
		if !slices.Contains(providerKeys, p.APIKeyEnv) {
			providerKeys = append(providerKeys, p.APIKeyEnv)
		}
	}
	slices.Sort(providerKeys)
	if got := missing.Vars(); !slices.Equal(got, providerKeys) {
		t.Errorf("missing %v, want exactly the provider keys %v", got, providerKeys)
	}
	keys := map[string]string{}
	for _, k := range providerKeys {
		keys[k] = "key-VALUE"
	}
	if err := f.Resolve(config.MapLookup(keys)); err != nil {
		t.Fatalf("with the provider keys set: %v", err)
	}
}

// Base URLs come from FLEET_PROVIDER_<ID>_BASE_URL, FLEET_PROVIDER_<ID>_SEARCH_BASE_URL
// and FLEET_ENGINE_<ID>_BASE_URL (the id upper-cased, other characters as '_'); an
// engine inherits its provider's overridden search URL; a bad URL is named.
func TestBaseURLsFromEnvironment(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{
	  "providers": {"my-llm": {"kind": "openai", "baseURL": "https://file.example/v1", "apiKeyEnv": "K"},
	                "glm":    {"kind": "glm", "apiKeyEnv": "K"}},
	  "models":    {"m": {"provider": "my-llm", "model": "x"}},
	  "routing":   {"web_search": [{"id": "r", "targets": ["glm.glm-4.7"]}]},
	  "webSearch": {"engines": [{"id": "glm", "providerKey": "glm.glm-4.7"},
	                            {"id": "searx-local", "kind": "searxng", "baseURL": "http://file.example:8080"},
	                            {"id": "brave", "kind": "brave"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"K": "k",
		"FLEET_PROVIDER_MY_LLM_BASE_URL":     "http://127.0.0.1:9/v1",
		"FLEET_PROVIDER_GLM_SEARCH_BASE_URL": "http://127.0.0.1:9/glm-chat",
		"FLEET_ENGINE_SEARX_LOCAL_BASE_URL":  "http://127.0.0.1:9/searxng",
	}
	if err := f.Resolve(config.MapLookup(env)); err != nil {
		t.Fatal(err)
	}
	if got := f.Providers["my-llm"].BaseURL; got != "http://127.0.0.1:9/v1" {
		t.Errorf("provider base URL %q", got)
	}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{}
	for _, c := range cfgs {
		urls[c.ID] = c.BaseURL
	}
	if urls["glm"] != "http://127.0.0.1:9/glm-chat" || urls["searx-local"] != "http://127.0.0.1:9/searxng" || urls["brave"] != "" {
		t.Errorf("engine base URLs %v", urls)
	}

	bad := map[string]string{"FLEET_ENGINE_BRAVE_BASE_URL": "not a url"}
	before := f.WebSearch.Engines[2].BaseURL
	err = f.Resolve(config.MapLookup(bad))
	if err == nil || !strings.Contains(err.Error(), "FLEET_ENGINE_BRAVE_BASE_URL must be an http(s) URL") || !strings.Contains(err.Error(), "K (needed by") {
		t.Errorf("bad URL and missing key: %v", err)
	}
	if f.WebSearch.Engines[2].BaseURL != before {
		t.Error("a failed Resolve changed a base URL")
	}
}
