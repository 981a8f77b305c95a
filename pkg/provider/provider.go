// Package provider is what every call to a paid provider shares, the search engines'
// (pkg/engines) and the main models' (pkg/llm/upstream, whose Caller makes the HTTP
// exchange): the kinds of failure and the retry decision they carry (Kind, Classify),
// the one rule for how long a provider asked us to wait (RetryAfter), key redaction
// (Redact), a key's fingerprint (its name in logs and in Redis), the rotation of several
// keys with shared rests (Keys over Cooldowns, which the fleet backs with Redis), the
// OAuth access token source some providers take instead of a key, and a main model's
// Credentials over them. Its vocabulary (answers, errors) is pkg/llm's.
package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Kind classifies a provider failure by what the caller should do about it. The
// values are stored (a resting key's reason in Redis) and shown (metric labels):
// never rename one.
type Kind string

// The kinds. Only RateLimited and Unavailable are worth retrying.
const (
	// RateLimited: the provider asked us to slow down (429); retry after its wait.
	RateLimited Kind = "rate_limited"
	// Unavailable: a 5xx, a timeout or a network failure; retry with back-off.
	Unavailable Kind = "unavailable"
	// BadRequest: the provider rejected the request (4xx, in-band invalid input).
	BadRequest Kind = "bad_request"
	// Auth: missing, invalid or unauthorized credentials (401/403).
	Auth Kind = "auth"
	// Quota: the account is out of money or over a hard usage limit (402, or a 429
	// that says so).
	Quota Kind = "quota"
	// Decode: the provider answered 2xx with a body we could not read.
	Decode Kind = "decode"
	// Canceled: the caller's context ended first.
	Canceled Kind = "canceled"
)

// Refused reports whether a failure of kind k is the provider refusing the credential
// (429, 401/403, 402): the key rests and the same call moves on to the next key.
func (k Kind) Refused() bool { return k == RateLimited || k == Auth || k == Quota }

// Retryable reports whether the same call may succeed later.
func (k Kind) Retryable() bool { return k == RateLimited || k == Unavailable }

// How long a key rests after each failure. A 429 without a wait rests the key for
// DefaultRateLimitRest; a key the provider refused (auth) or that ran out of money
// (quota) will not mend by itself within a job, so it rests much longer (an operator
// replacing it restarts the workers anyway).
const (
	DefaultRateLimitRest = 30 * time.Second
	AuthRest             = 30 * time.Minute
	QuotaRest            = 10 * time.Minute
)

// RestFor is how long a key rests after a failure of kind k; retryAfter (the
// provider's wait, 0 when it named none) is the rest of a rate-limited key. It is 0
// for a failure that says nothing about the key (a 5xx, a bad query).
func RestFor(k Kind, retryAfter time.Duration) time.Duration {
	switch k {
	case Auth:
		return AuthRest
	case Quota:
		return QuotaRest
	case RateLimited:
		if retryAfter > 0 {
			return retryAfter
		}
		return DefaultRateLimitRest
	}
	return 0
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
	Reason Kind
}

// Cooldowns is the shared memory of which keys are resting, for the keys of one
// family of callers (the fleet keeps the engines' and the main models' apart). Keys
// are named by their Fingerprint, never by their value, within a scope (an engine
// id, a provider name).
type Cooldowns interface {
	// CoolDown rests the key fp of scope for d because of reason (a longer rest
	// already running is never shortened). It reports whether the key was usable
	// before: exactly one of several concurrent callers sees true.
	CoolDown(ctx context.Context, scope, fp string, reason Kind, d time.Duration) (bool, error)
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
