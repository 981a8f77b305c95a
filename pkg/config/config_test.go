package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// The example in config/ is what operators copy: it must load, resolve every engine,
// and build every engine kind it names.
func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()
	f, err := config.LoadFile(filepath.Join("..", "..", "config", "example.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, c := range cfgs {
		kinds[c.ID] = c.Kind + "/" + c.Model + "/" + c.APIKeyEnv
	}
	if kinds["glm"] != "glm-chat/glm-4.7/ZHIPU_API_KEY" || kinds["google"] != "gemini/gemini-2.5-flash/GEMINI_API_KEY" || kinds["brave"] != "brave//BRAVE_API_KEY" {
		t.Errorf("resolved engines: %v", kinds)
	}
	if _, err := engines.FromConfig(cfgs, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.KeyEnvs(), ","); !strings.Contains(got, "OPENAI_API_KEY") || strings.Contains(got, "sk-") {
		t.Errorf("key variables %s", got)
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
		`{"webSearch":{"enginez":[]}}`: `unknown field "enginez"`,
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
	os.Setenv("REDIS_URL", "redis://user:s3cret-pass@redis.internal:6379/0")
	os.Setenv("NATS_URL", "nats://token:nats-secret@nats.internal:4222")
	defer os.Unsetenv("REDIS_URL")
	defer os.Unsetenv("NATS_URL")
	e, err := config.LoadEnv()
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
