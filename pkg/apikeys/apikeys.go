// Package apikeys holds what the search engines and the main-model callers share about
// provider credentials: a key's fingerprint (its name in logs and in Redis), the
// shared memory of resting keys (Cooldowns, which the fleet backs with Redis), and
// the OAuth access token source some providers take instead of a key. It knows no
// provider and no protocol.
package apikeys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Reason is why a key rests. The values are the engines' error kinds, so a rest
// recorded by either side reads the same.
type Reason string

// The reasons a key rests.
const (
	RateLimited Reason = "rate_limited" // 429: the provider asked to wait
	Auth        Reason = "auth"         // 401/403: the provider refused the key
	Quota       Reason = "quota"        // 402: the key ran out of money
)

// How long a key rests after each failure. A 429 without Retry-After rests the key
// for DefaultRateLimitRest; a key the provider refused (auth) or that ran out of
// money (quota) will not mend by itself within a job, so it rests much longer (an
// operator replacing it restarts the workers anyway).
const (
	DefaultRateLimitRest = 30 * time.Second
	AuthRest             = 30 * time.Minute
	QuotaRest            = 10 * time.Minute
)

// RestFor is how long a key rests for reason; retryAfter (the provider's wait, 0 when
// it named none) is the rest of a rate-limited key.
func RestFor(reason Reason, retryAfter time.Duration) time.Duration {
	switch reason {
	case Auth:
		return AuthRest
	case Quota:
		return QuotaRest
	}
	if retryAfter > 0 {
		return retryAfter
	}
	return DefaultRateLimitRest
}

// Fingerprint names a key in logs and in Redis without revealing it: "k-" and the
// first 8 hex digits of its SHA-256 ("k-none" for the keyless slot).
func Fingerprint(key string) string {
	if key == "" {
		return "k-none"
	}
	sum := sha256.Sum256([]byte(key))
	return "k-" + hex.EncodeToString(sum[:4])
}

// Rest is how long a key still rests and the failure that made it rest.
type Rest struct {
	Left   time.Duration
	Reason Reason
}

// Cooldowns is the shared memory of which keys are resting, for the keys of one
// family of callers (the fleet keeps the engines' and the main models' apart). Keys
// are named by their Fingerprint, never by their value, within a scope (an engine
// id, a provider name).
type Cooldowns interface {
	// CoolDown rests the key fp of scope for d because of reason (a longer rest
	// already running is never shortened). It reports whether the key was usable
	// before: exactly one of several concurrent callers sees true.
	CoolDown(ctx context.Context, scope, fp string, reason Reason, d time.Duration) (bool, error)
	// Resting returns, for each of fps, how long the key still rests and why (a zero
	// Left: usable).
	Resting(ctx context.Context, scope string, fps []string) ([]Rest, error)
}

// TokenSource hands out OAuth access tokens, for providers that authenticate with
// one instead of an API key (Gemini through Vertex AI, OpenAI). The config layer
// implements it (a token file, or a refresh command); the token is sent as a bearer
// token.
type TokenSource interface {
	// Token returns the current access token, fetching a new one when the last has
	// expired or was rejected. Its error never contains a token.
	Token(ctx context.Context) (string, error)
	// Rejected tells the source that the provider refused tok (401/403), so the next
	// Token fetches a fresh one instead of handing it out again.
	Rejected(tok string)
}
