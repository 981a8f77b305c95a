// Package enginecfg is what configures an engine, without the engines: the
// configuration layer (pkg/config) builds these values and validates engine ids and
// kinds, and pkg/engines builds the engines from them.
package enginecfg

import (
	"encoding/json"
	"regexp"

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// Config configures one engine.
type Config struct {
	// ID is the engine id the main model and the subjects use ("glm", "google").
	// Letters, digits, '-' and '_' only: it becomes a NATS subject token.
	ID string `json:"id"`
	// Kind is the wire protocol: one of Kinds.
	Kind string `json:"kind"`
	// BaseURL overrides the provider's default endpoint (tests and the simulator
	// point it elsewhere; a self-hosted SearXNG has no default).
	BaseURL string `json:"baseURL,omitempty"`
	// Model is the provider model for LLM-grounded kinds ("glm-4.7", "gemini-2.5-flash").
	Model string `json:"model,omitempty"`
	// APIKeyEnv names the environment variable holding the API key, for messages
	// ("API key variable X is not set"); the engine never reads the environment.
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// APIKey is the key itself, resolved by the config layer (config.File.Resolve) or
	// set by whoever builds the Config in code. It is never serialized, logged, put in
	// an error or in a result; empty means the engine sends no credential.
	APIKey string `json:"-"`
	// APIKeys are several keys to rotate over (a comma-separated apiKeyEnv, see
	// keys.go); when set they replace APIKey. Never serialized.
	APIKeys []string `json:"-"`
	// Token, when set, supplies OAuth access tokens instead of a fixed key (see
	// engines' tokens.go); APIKey and APIKeys are then unused.
	Token provider.TokenSource `json:"-"`
	// CostPerSearchUSD overrides the kind's list price per search, for accounting.
	CostPerSearchUSD *float64 `json:"costPerSearchUSD,omitempty"`
	// Options are per-kind settings, decoded by the kind (see its file).
	Options json.RawMessage `json:"options,omitempty"`
}

// Kinds are the engine kinds pkg/engines builds, sorted (a test there keeps the two
// lists the same).
var Kinds = []string{
	"anthropic", "brave", "cloudflare", "exa", "gemini", "glm-api", "glm-chat", "kimi", "linkup",
	"openai", "openrouter", "parallel", "perplexity", "perplexity-search", "searxng", "serper", "tavily",
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidID reports whether id can name an engine (it becomes a subject token).
func ValidID(id string) bool { return idRE.MatchString(id) }
