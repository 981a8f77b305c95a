package config_test

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
)

// A Perplexity provider's main models speak the Agent API by default; Sonar's chat
// completions, named explicitly, are refused with the reason; its own search is not
// forwarded as a model's native search.
func TestPerplexityModelsSpeakTheAgentAPI(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{
	  "providers": {"pplx": {"kind": "perplexity", "baseURL": "https://api.perplexity.ai", "apiKeyEnv": "PPLX"}},
	  "models": {"pplx-gpt": {"provider": "pplx", "model": "openai/gpt-5.2"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Providers["pplx"].Protocol; got != upstream.ModelPerplexityAgent {
		t.Errorf("protocol %q, want %q", got, upstream.ModelPerplexityAgent)
	}
	if api, _ := upstream.ModelAPIFor(f.Providers["pplx"].Protocol); api.Path("openai/gpt-5.2", false) != "/v1/agent" {
		t.Errorf("path %q, want /v1/agent", api.Path("", false))
	}
	_, err = config.ParseFile([]byte(`{
	  "providers": {"pplx": {"kind": "perplexity", "protocol": "openai-chat", "baseURL": "https://api.perplexity.ai", "apiKeyEnv": "PPLX"}},
	  "models": {"sonar": {"provider": "pplx", "model": "sonar"}}}`))
	if err == nil || !strings.Contains(err.Error(), "retired") || !strings.Contains(err.Error(), upstream.ModelPerplexityAgent) {
		t.Errorf("openai-chat for Perplexity: err = %v, want a refusal naming the Agent API", err)
	}
	_, err = config.ParseFile([]byte(`{
	  "providers": {"pplx": {"kind": "perplexity", "baseURL": "https://api.perplexity.ai", "apiKeyEnv": "PPLX"}},
	  "models": {"pplx-gpt": {"provider": "pplx", "model": "openai/gpt-5.2", "webSearch": "native"}}}`))
	if err == nil || !strings.Contains(err.Error(), "native") {
		t.Errorf("native search on the Agent API: err = %v, want a refusal", err)
	}
}

// webSearch.fetchProvider names a Parallel provider whose Extract API reads web_fetch
// pages; any other provider is refused.
func TestFetchProvider(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{
	  "providers": {"par": {"kind": "parallel", "searchBaseURL": "https://p.example", "apiKeyEnv": "PAR"}},
	  "webSearch": {"engines": [], "fetchProvider": "par"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Resolve(config.MapLookup(map[string]string{"PAR": "k"})); err != nil {
		t.Fatal(err)
	}
	if base, key, ok := f.FetchBackend(); !ok || base != "https://p.example" || key != "k" {
		t.Errorf("FetchBackend = %q %q %v", base, key, ok)
	}
	_, err = config.ParseFile([]byte(`{
	  "providers": {"o": {"kind": "openai", "apiKeyEnv": "O"}},
	  "webSearch": {"engines": [], "fetchProvider": "o"}}`))
	if err == nil || !strings.Contains(err.Error(), "fetchProvider") {
		t.Errorf("a non-Parallel fetch provider: err = %v", err)
	}
}
