package engines

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// Key rotation. An engine configured with several API keys (Config.APIKeys, from a
// comma-separated apiKeyEnv) is built once per key; each search takes the next key
// of the provider layer's rotation (provider.Keys: round robin among the keys that do
// not rest), and a key that gets a 429 (rate limited), a 401/403 (auth) or a 402
// (quota) rests and the same search moves on to the next key at once. The rests live
// in Cooldowns, which the fleet backs with Redis (state.Store), so a key that one
// worker saw refused rests for every worker. With no Cooldowns (FromConfig), keys
// still rotate and a refused key is still passed over within the search, but nothing
// is remembered between searches.
//
// An engine whose every key rests is resting: its searches fail at once, without a
// request, with the error that rested the key that comes back first (a RateLimited
// error carries how long is left as RetryAfter). The search worker then falls back to
// another engine, or retries later. An engine without a key has one keyless slot, so
// a 429 rests it too.

// Cooldowns is the shared memory of which keys are resting: the provider layer's
// (provider.Cooldowns), one type for engines and main models.
type Cooldowns = provider.Cooldowns

// Rest is how long a key still rests and the failure that made it rest.
type Rest = provider.Rest

// How long a key rests after each failure (provider.RestFor).
const (
	DefaultRateLimitRest = provider.DefaultRateLimitRest
	AuthRest             = provider.AuthRest
	QuotaRest            = provider.QuotaRest
)

// Fingerprint names a key in logs and in Redis without revealing it: "k-" and the
// first 8 hex digits of its SHA-256 ("k-none" for the keyless slot).
func Fingerprint(key string) string { return provider.Fingerprint(key) }

// Options are what FromConfigWith adds to FromConfig.
type Options struct {
	// Cooldowns is shared across workers (state.Store); nil remembers nothing.
	Cooldowns Cooldowns
	// Log receives the one warning per key that the provider refused (auth or
	// quota), with its fingerprint, never the key; nil is slog.Default(). It also
	// receives one warning per engine per day whose provider answered with a
	// Deprecation or Sunset header or 404/410 (deprecation.go).
	Log *slog.Logger
	// Deprecation counts each such answer by engine and signal ("deprecation",
	// "sunset", "404", "410"): the fleet_provider_deprecation metric. Nil counts none.
	Deprecation func(engine, signal string)
}

// keyed runs one engine over several keys: per[i] is the engine built with key i.
type keyed struct {
	id   string
	per  []Engine
	keys *provider.Keys
}

func (k *keyed) Name() string { return k.id }

// Capabilities are the kind's: every per-key engine is the same kind.
func (k *keyed) Capabilities() Capabilities { return capsOf(k.per[0]) }

// Search runs q with the next usable key, moving on to the following keys while a
// key is refused (429, 401/403, 402).
func (k *keyed) Search(ctx context.Context, q Query) (*Result, error) {
	n := len(k.per)
	rests := k.keys.Resting(ctx)
	start := k.keys.Start()
	var last error
	for j := range n {
		i := (start + j) % n
		if rests[i].Left > 0 {
			continue
		}
		res, err := k.per[i].Search(ctx, q)
		if err == nil {
			return res, nil
		}
		last = err
		e := AsError(k.id, err)
		if !e.Kind.Refused() {
			return nil, err
		}
		k.keys.CoolDown(ctx, i, e.Kind, provider.RestFor(e.Kind, e.RetryAfter), e.Status)
	}
	if last != nil {
		return nil, last
	}
	return nil, k.resting(rests)
}

// resting is the error of an engine whose every key rests: the reason of the key that
// comes back first, with how long is left.
func (k *keyed) resting(rests []Rest) *Error {
	soon := provider.Soonest(rests)
	kind := cmp.Or(soon.Reason, RateLimited)
	e := &Error{Kind: kind, Engine: k.id, Message: "every API key of this engine is cooling down (" + soon.Left.Round(time.Second).String() + " left)"}
	if kind == RateLimited {
		e.RetryAfter = soon.Left
	}
	return e
}
