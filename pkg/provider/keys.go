package provider

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Keys is the rotation of one scope's credentials (an engine's keys, a model
// provider's keys) with shared rests. Each call takes the next key round robin (a
// counter per process, Start) among the keys that do not rest (Resting); a key the
// provider refuses (Kind.Refused: 429, 401/403, 402) rests in Cooldowns (CoolDown),
// which the fleet backs with Redis, so it rests for every worker, and the call moves on
// at once to the next usable key. A refused key (auth, quota) is logged once per
// process by its fingerprint and position, never its value. Without Cooldowns keys
// still rotate and a refused key is still passed over within the call, but nothing is
// remembered between calls. The engines (pkg/engines keys.go) and the main-model
// callers (Credentials) both rotate with it.
type Keys struct {
	scope string
	fps   []string
	o     KeyOptions
	next  atomic.Uint64
	// told holds the fingerprints already reported as refused by this process.
	told sync.Map
}

// KeyOptions are the settings of a Keys.
type KeyOptions struct {
	// Cooldowns is shared across workers; nil remembers nothing between calls.
	Cooldowns Cooldowns
	// Log receives the one warning per refused key; nil is slog.Default().
	Log *slog.Logger
	// KeyEnv is the variable the keys came from, named in the warning.
	KeyEnv string
	// Who names the scope in the warning: "engine" or "provider" (the log attribute
	// that holds the scope, and the first word of the message).
	Who string
}

// NewKeys returns the rotation of the keys fingerprinted fps (Fingerprint) of scope.
func NewKeys(scope string, fps []string, o KeyOptions) *Keys {
	o.Log = cmp.Or(o.Log, slog.Default())
	o.Who = cmp.Or(o.Who, "provider")
	return &Keys{scope: scope, fps: fps, o: o}
}

// Start returns where this call's round robin starts (a key index).
func (k *Keys) Start() int { return int(k.next.Add(1)-1) % max(len(k.fps), 1) }

// Resting reads the rests of the keys, one per key; none rests without Cooldowns or
// when they cannot be read (Redis trouble must not stop calls).
func (k *Keys) Resting(ctx context.Context) []Rest {
	if c := k.o.Cooldowns; c != nil {
		if rests, err := c.Resting(ctx, k.scope, k.fps); err == nil && len(rests) == len(k.fps) {
			return rests
		}
	}
	return make([]Rest, len(k.fps))
}

// RestingFor reports whether every key rests, and for how long at least; false when
// there are no Cooldowns or they cannot be read.
func (k *Keys) RestingFor(ctx context.Context) (time.Duration, bool) {
	rests := k.Resting(ctx)
	if len(rests) == 0 || slices.ContainsFunc(rests, func(r Rest) bool { return r.Left <= 0 }) {
		return 0, false
	}
	return Soonest(rests).Left, true
}

// CoolDown rests key i for d after a refusal of kind reason (the provider answered
// status), and reports a key refused for auth or quota once.
func (k *Keys) CoolDown(ctx context.Context, i int, reason Kind, d time.Duration, status int) {
	first := true
	if c := k.o.Cooldowns; c != nil {
		var err error
		if first, err = c.CoolDown(ctx, k.scope, k.fps[i], reason, d); err != nil {
			first = true
		}
	}
	// Told once per process: by the key's fingerprint, position and variable, never
	// its value.
	if reason != RateLimited && first && k.FirstTelling(i) {
		k.o.Log.Warn(k.o.Who+": an API key was refused; it rests, the other keys carry on",
			k.o.Who, k.scope, "key", k.fps[i], "position", strconv.Itoa(i+1)+" of "+strconv.Itoa(len(k.fps)),
			"variable", k.o.KeyEnv, "kind", string(reason), "status", status, "rest", d)
	}
}

// FirstTelling reports whether key i's refusal is told for the first time in this
// process (and marks it told).
func (k *Keys) FirstTelling(i int) bool {
	_, told := k.told.LoadOrStore(k.fps[i], true)
	return !told
}

// Soonest is the rest that ends first.
func Soonest(rests []Rest) Rest {
	var soon Rest
	for i, r := range rests {
		if i == 0 || r.Left < soon.Left {
			soon = r
		}
	}
	return soon
}
