package config_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// vertexEngine loads a config with one Gemini-on-Vertex engine at the simulator whose
// credential is accessToken (JSON), and returns the engine.
func vertexEngine(t *testing.T, simURL, accessToken string) engines.Engine {
	t.Helper()
	f, err := config.ParseFile(fmt.Appendf(nil, `{"webSearch":{"engines":[{"id":"vx","kind":"gemini","baseURL":%q,
	  "options":{"vertex":{"project":"p"}},"accessToken":%s}]}}`, simURL+"/gemini", accessToken))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Resolve(config.MapLookup(nil)); err != nil {
		t.Fatal(err)
	}
	cfgs, err := f.EngineConfigs()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := engines.FromConfig(cfgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Get("vx")
	return e
}

var tokenQuery = engines.Query{Query: "latest news about NATS JetStream"}

// A refresh command's token is used until the provider refuses it; then the command
// runs again and the same search goes on with the new token, which later searches
// keep using.
func TestAccessTokenCommandRefreshesOnRefusal(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	script := filepath.Join(dir, "token.sh")
	os.WriteFile(script, []byte("#!/bin/sh\nn=$(cat \"$0.count\" 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > \"$0.count\"\necho \"tok-$n\"\n"), 0o700)
	sim.SetKeyFault("/gemini", "tok-1", 401, 0, 0)

	eng := vertexEngine(t, srv.URL, fmt.Sprintf(`{"command":[%q]}`, script))
	for i := range 3 {
		if _, err := eng.Search(context.Background(), tokenQuery); err != nil {
			t.Fatalf("search %d: %v", i, err)
		}
	}
	runs, _ := os.ReadFile(script + ".count")
	if strings.TrimSpace(string(runs)) != "2" {
		t.Errorf("the command ran %s times, want 2 (first token, then once after the refusal)", runs)
	}
	if got := sim.Stats().Requests["gemini"]; got != 4 {
		t.Errorf("%d requests, want 4 (the refused token once, then 3 searches)", got)
	}
}

// A token file is read for every search: a renewed token is used at once.
func TestAccessTokenFileIsReadAgain(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("file-tok-a\n"), 0o600)
	eng := vertexEngine(t, srv.URL, fmt.Sprintf(`{"file":%q}`, file))
	if _, err := eng.Search(context.Background(), tokenQuery); err != nil {
		t.Fatal(err)
	}
	sim.SetKeyFault("/gemini", "file-tok-a", 401, 0, 0) // the old token expires
	os.WriteFile(file, []byte("file-tok-b"), 0o600)
	if _, err := eng.Search(context.Background(), tokenQuery); err != nil {
		t.Fatalf("renewed token not used: %v", err)
	}
}

// Bad access token settings are refused when the file loads; a token source that
// fails at search time is an auth error that holds no token.
func TestAccessTokenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for in, want := range map[string]string{
		`{"file":"/x","command":["y"]}`: "needs exactly one of file and command",
		`{}`:                            "needs exactly one of file and command",
		`{"command":[""]}`:              "command[0] must name a program",
	} {
		_, err := config.ParseFile([]byte(`{"webSearch":{"engines":[{"id":"vx","kind":"openai","accessToken":` + in + `}]}}`))
		if err == nil || !strings.Contains(err.Error(), "webSearch.engines[0].accessToken") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
	if _, err := config.ParseFile([]byte(`{"webSearch":{"engines":[{"id":"vx","kind":"openai","apiKeyEnv":"K","accessToken":{"file":"/x"}}]}}`)); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("apiKeyEnv and accessToken: %v", err)
	}
	for in, want := range map[string]string{
		fmt.Sprintf(`{"file":%q}`, filepath.Join(dir, "missing")): "cannot be read",
		`{"command":["searchfleet-no-such-token-program"]}`:       "is not an executable program",
	} {
		f, err := config.ParseFile([]byte(`{"webSearch":{"engines":[{"id":"vx","kind":"openai","accessToken":` + in + `}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Resolve(config.MapLookup(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Resolve error %v, want %q", in, err, want)
		}
	}

	// A command that prints a token but fails: the search fails as auth, without the
	// token (the error reaches the job's result).
	script := filepath.Join(dir, "fail.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho tok-SECRET-VALUE\necho tok-SECRET-VALUE >&2\nexit 3\n"), 0o700)
	f, err := config.ParseFile(fmt.Appendf(nil, `{"webSearch":{"engines":[{"id":"vx","kind":"openai","baseURL":"http://127.0.0.1:1","accessToken":{"command":[%q]}}]}}`, script))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Resolve(config.MapLookup(nil)); err != nil {
		t.Fatal(err)
	}
	cfgs, _ := f.EngineConfigs()
	reg, err := engines.FromConfig(cfgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := reg.Get("vx")
	_, err = eng.Search(context.Background(), tokenQuery)
	var e *engines.Error
	if !errors.As(err, &e) || e.Kind != engines.Auth || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), dir) {
		t.Fatalf("error %v, want an auth error without the token or the command's path", err)
	}
}

// A main-model provider takes an access token instead of an API key: the file is
// checked by Resolve and becomes the provider's Token; apiKeyEnv beside it, or an
// anthropic-messages provider (which takes x-api-key only), is refused.
func TestProviderAccessToken(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("ya29.provider-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.ParseFile(fmt.Appendf(nil, `{"providers":{"vertex":{"kind":"gemini","protocol":"gemini","baseURL":"http://127.0.0.1:1","accessToken":{"file":%q}}},
	  "models":{"m":{"provider":"vertex","model":"gemini-2.5-flash"}}}`, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Resolve(config.MapLookup(nil)); err != nil {
		t.Fatal(err)
	}
	tok := f.Providers["vertex"].Token
	if tok == nil {
		t.Fatal("no token source for the provider")
	}
	if got, err := tok.Token(context.Background()); err != nil || got != "ya29.provider-token" {
		t.Fatalf("token = %q, %v", got, err)
	}
	for in, want := range map[string]string{
		`{"kind":"openai","apiKeyEnv":"K","accessToken":{"file":"/x"}}`:                    "not both",
		`{"kind":"anthropic","protocol":"anthropic-messages","accessToken":{"file":"/x"}}`: "takes an API key",
		`{"kind":"openai","accessToken":{}}`:                                               "needs exactly one of file and command",
	} {
		if _, err := config.ParseFile([]byte(`{"providers":{"p":` + in + `}}`)); err == nil || !strings.Contains(err.Error(), "providers.p") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
	missing, err := config.ParseFile([]byte(`{"providers":{"p":{"kind":"openai","accessToken":{"file":"/nonexistent/token"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := missing.Resolve(config.MapLookup(nil)); err == nil || !strings.Contains(err.Error(), "providers.p.accessToken") {
		t.Errorf("a missing token file: %v", err)
	}
}
