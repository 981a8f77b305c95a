package engines

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/searchfleet/searchfleet/pkg/apikeys"
)

// Key rotation. An engine configured with several API keys (Config.APIKeys, from a
// comma-separated apiKeyEnv) is built once per key; each search takes the next key
// round robin (a counter per process) among the keys that are not cooling down, and
// a key that gets a 429 (rate limited), a 401/403 (auth) or a 402 (quota) cools down
// and the same search moves on to the next key at once. The cooldowns live in
// Cooldowns, which the fleet backs with Redis (state.Store), so a key that one worker
// saw rejected rests for every worker. With no Cooldowns (FromConfig), keys still
// rotate and a rejected key is still passed over within the search, but nothing is
// remembered between searches.
//
// An engine whose every key is cooling down is resting: its searches fail at once,
// without a request, with the error that cooled the key that comes back first (a
// RateLimited error carries how long is left as RetryAfter). The search worker then
// falls back to another engine, or retries later. An engine without a key has one
// keyless slot, so a 429 rests it too.

// Cooldowns is the shared memory of which keys are resting. Keys are named by their
// Fingerprint, never by their value.
type Cooldowns interface {
	// CoolDown rests the key fp of engine for d because of reason (a longer rest
	// already running is never shortened). It reports whether the key was usable
	// before: exactly one of several concurrent callers sees true.
	CoolDown(ctx context.Context, engine, fp string, reason ErrorKind, d time.Duration) (bool, error)
	// Resting returns, for each of fps, how long the key still rests and why (a zero
	// Rest: usable).
	Resting(ctx context.Context, engine string, fps []string) ([]Rest, error)
}

// Rest is how long a key still rests and the failure that made it rest.
type Rest struct {
	Left   time.Duration
	Reason ErrorKind
}

// How long a key rests after each failure. A 429 without Retry-After rests the key
// for DefaultRateLimitRest; a key the provider refused (auth) or that ran out of
// money (quota) will not mend by itself within a job, so it rests much longer (an
// operator replacing it restarts the workers anyway).
const (
	DefaultRateLimitRest = apikeys.DefaultRateLimitRest
	AuthRest             = apikeys.AuthRest
	QuotaRest            = apikeys.QuotaRest
)

// restFor is how long a failure rests the key that got it; false when the failure
// says nothing about the key (a 5xx, a bad query).
func restFor(e *Error) (time.Duration, bool) {
	switch e.Kind {
	case RateLimited:
		if e.RetryAfter > 0 {
			return e.RetryAfter, true
		}
		return DefaultRateLimitRest, true
	case Auth:
		return AuthRest, true
	case Quota:
		return QuotaRest, true
	}
	return 0, false
}

// Fingerprint names a key in logs and in Redis without revealing it: "k-" and the
// first 8 hex digits of its SHA-256 ("k-none" for the keyless slot).
func Fingerprint(key string) string { return apikeys.Fingerprint(key) }

// Options are what FromConfigWith adds to FromConfig.
type Options struct {
	// Cooldowns is shared across workers (state.Store); nil remembers nothing.
	Cooldowns Cooldowns
	// Log receives the one warning per key that the provider refused (auth or
	// quota), with its fingerprint, never the key; nil is slog.Default().
	Log *slog.Logger
}

// keyed runs one engine over several keys: per[i] is the engine built with key i.
type keyed struct {
	id     string
	keyEnv string
	per    []Engine
	fps    []string
	cool   Cooldowns
	log    *slog.Logger
	next   atomic.Uint64
	// told holds the fingerprints already reported as refused by this process.
	told sync.Map
}

func (k *keyed) Name() string { return k.id }

// Capabilities are the kind's: every per-key engine is the same kind.
func (k *keyed) Capabilities() Capabilities {
	if c, ok := k.per[0].(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// Search runs q with the next usable key, moving on to the following keys while a
// key is refused (429, 401/403, 402).
func (k *keyed) Search(ctx context.Context, q Query) (*Result, error) {
	n := len(k.per)
	var rests []Rest
	if k.cool != nil {
		var err error
		if rests, err = k.cool.Resting(ctx, k.id, k.fps); err != nil {
			rests = nil // Redis trouble must not stop searches: try every key
		}
	}
	start := int(k.next.Add(1) - 1)
	var last error
	for j := range n {
		i := (start + j) % n
		if i < len(rests) && rests[i].Left > 0 {
			continue
		}
		res, err := k.per[i].Search(ctx, q)
		if err == nil {
			return res, nil
		}
		last = err
		e := AsError(k.id, err)
		d, ok := restFor(e)
		if !ok {
			return nil, err
		}
		k.coolDown(ctx, i, e, d)
	}
	if last != nil {
		return nil, last
	}
	return nil, k.resting(rests)
}

// restingFor reports whether every key of the engine rests, and for how long at
// least; false when the cooldowns cannot be read.
func (k *keyed) restingFor(ctx context.Context) (time.Duration, bool) {
	if k.cool == nil {
		return 0, false
	}
	rests, err := k.cool.Resting(ctx, k.id, k.fps)
	if err != nil {
		return 0, false
	}
	soon := rests[0].Left
	for _, r := range rests {
		if r.Left <= 0 {
			return 0, false
		}
		soon = min(soon, r.Left)
	}
	return soon, true
}

// coolDown rests key i after e, and reports a refused key once.
func (k *keyed) coolDown(ctx context.Context, i int, e *Error, d time.Duration) {
	first := true
	if k.cool != nil {
		var err error
		if first, err = k.cool.CoolDown(ctx, k.id, k.fps[i], e.Kind, d); err != nil {
			first = true
		}
	}
	if e.Kind != Auth && e.Kind != Quota || !first {
		return
	}
	if _, told := k.told.LoadOrStore(k.fps[i], true); told {
		return
	}
	k.log.Warn("engine: an API key was refused; it rests, the other keys carry on",
		"engine", k.id, "key", k.fps[i], "position", strconv.Itoa(i+1)+" of "+strconv.Itoa(len(k.per)),
		"variable", k.keyEnv, "kind", string(e.Kind), "status", e.Status, "rest", d)
}

// resting is the error of an engine whose every key rests: the reason of the key that
// comes back first, with how long is left.
func (k *keyed) resting(rests []Rest) *Error {
	soon := rests[0]
	for _, r := range rests[1:] {
		if r.Left < soon.Left {
			soon = r
		}
	}
	kind := soon.Reason
	if kind == "" {
		kind = RateLimited
	}
	e := &Error{Kind: kind, Engine: k.id, Message: "every API key of this engine is cooling down (" + soon.Left.Round(time.Second).String() + " left)"}
	if kind == RateLimited {
		e.RetryAfter = soon.Left
	}
	return e
}
