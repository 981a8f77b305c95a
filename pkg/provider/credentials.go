package provider

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Credentials are how a main-model caller authenticates with its provider: several
// API keys (from a comma-separated apiKeyEnv), or an OAuth access token source.
//
// Each model call takes the next key round robin (a counter per process) among the
// keys that are not resting. A key the provider refuses — 429 (rate limited), 401/403
// (auth), 402 or an insufficient_quota 429 (quota) — rests in Cooldowns, which the
// fleet backs with Redis (state.ModelKeyCooldowns), so it rests for every worker; and
// since a refused call is not paid for, the same call moves on at once to the next
// usable key. When no key is left, the call fails with the error that lets the step
// retry when the first key comes back (a 429 whose RetryAfter is the soonest rest).
// A refused key (auth, quota) is logged once per process by its fingerprint, never
// its value.
//
// With a token source, every call uses its current token (sent as a bearer token);
// a call refused for its token is retried once with a fresh one (a command runs
// again; a file is read again, so a renewed file is picked up at once).
type Credentials struct {
	provider string
	keys     []string
	tok      TokenSource
	cool     Cooldowns
	// rot is the rotation of the keys (or of the token source's one slot).
	rot *Keys

	// lastTok is the last token handed out, redacted from errors like the keys.
	lastTok atomic.Pointer[string]
}

// CredentialOptions are what NewCredentials adds to the keys.
type CredentialOptions struct {
	// KeyEnv is the variable the keys came from, named in the refused-key warning.
	KeyEnv string
	// Token, when set, is used instead of keys.
	Token TokenSource
	// Cooldowns is shared across workers (state.ModelKeyCooldowns); nil remembers
	// nothing between calls (a refused key is still passed over within a call).
	Cooldowns Cooldowns
	// Log receives the one warning per refused key; nil is slog.Default().
	Log *slog.Logger
}

// tokenSlot names the one credential of a token source in Cooldowns: the tokens
// change, the identity they stand for does not.
const tokenSlot = "t-oauth"

// NewCredentials returns the credentials of provider: keys (empty keys are dropped;
// none is one keyless slot, for local servers) or o.Token.
func NewCredentials(name string, keys []string, o CredentialOptions) *Credentials {
	c := &Credentials{provider: name, tok: o.Token, cool: o.Cooldowns}
	for _, k := range keys {
		if k != "" {
			c.keys = append(c.keys, k)
		}
	}
	if len(c.keys) == 0 {
		c.keys = []string{""}
	}
	var fps []string
	for _, k := range c.keys {
		fps = append(fps, Fingerprint(k))
	}
	if c.tok != nil {
		c.keys, fps = nil, []string{tokenSlot}
	}
	c.rot = NewKeys(name, fps, KeyOptions{Cooldowns: o.Cooldowns, Log: o.Log, KeyEnv: o.KeyEnv, Who: "provider"})
	return c
}

// Credential is what one request authenticates with.
type Credential struct {
	// Value is the API key or access token ("" for a keyless provider).
	Value string
	// Token reports an OAuth access token: every protocol sends it as a bearer token
	// (Gemini too, instead of its x-goog-api-key).
	Token bool
}

// TryAsync runs call with a usable credential, and with the next one while the provider
// refuses the credential (see Credentials). It is written in continuation-passing
// style, so that no goroutine need wait on a call: call makes one request with cred
// and calls its done exactly once with the outcome, on any goroutine; the call with
// the next credential starts from that callback. call gets onDelta wrapped: once it
// has passed text on, a refused call is not tried again (the text was streamed). TryAsync calls done exactly once with the outcome of the
// whole try, on the goroutine of the last call's done (before TryAsync returns when
// no call was made or every call finished inline).
func (c *Credentials) TryAsync(ctx context.Context, onDelta func(llm.Delta), call func(Credential, func(llm.Delta), func(error)), done func(error)) {
	t := &try{c: c, ctx: ctx, call: call, done: done, rests: c.rot.Resting(ctx)}
	t.onDelta = onDelta
	if onDelta != nil {
		t.onDelta = func(d llm.Delta) { t.sent = true; onDelta(d) }
	}
	if c.tok == nil {
		t.start = c.rot.Start()
		t.key(0)
		return
	}
	if t.rests[0].Left > 0 {
		done(c.exhausted(t.rests, nil))
		return
	}
	t.token(0)
}

// try is one TryAsync in progress. Its calls run one after the other, each started
// from the callback of the one before, so its fields need no lock.
type try struct {
	c       *Credentials
	ctx     context.Context
	onDelta func(llm.Delta)
	call    func(Credential, func(llm.Delta), func(error))
	done    func(error)
	rests   []Rest
	sent    bool  // onDelta has passed text on: a refused call is not tried again
	start   int   // the round-robin position of the first key tried
	last    error // the last refusal
}

// key calls with the j-th key from start on that does not rest, or ends the try when
// none is left.
func (t *try) key(j int) {
	n := len(t.c.keys)
	for ; j < n; j++ {
		i := (t.start + j) % n
		if t.rests[i].Left > 0 {
			continue
		}
		t.call(Credential{Value: t.c.keys[i]}, t.onDelta, func(err error) { t.keyDone(i, j, err) })
		return
	}
	t.done(t.c.exhausted(t.rests, t.last))
}

// keyDone takes the outcome of the call with key i (the j-th tried): a refused key
// rests and the try moves on to the next key, unless text was streamed already.
func (t *try) keyDone(i, j int, err error) {
	if err == nil {
		t.done(nil)
		return
	}
	t.last = err
	reason, d, le, ok := keyFailure(err)
	if !ok {
		t.done(err)
		return
	}
	t.rests[i] = Rest{Left: d, Reason: reason}
	t.c.rot.CoolDown(t.ctx, i, reason, d, le.Status)
	if t.sent {
		t.done(err)
		return
	}
	t.key(j + 1)
}

// token calls with the token source's current token (attempt 0), or with a fresh one
// after the provider refused it (attempt 1).
func (t *try) token(attempt int) {
	tok, err := t.c.tok.Token(t.ctx)
	if err != nil {
		// Retryable: a file being rewritten, a command that failed once.
		t.done(&llm.Error{Provider: t.c.provider, Status: http.StatusServiceUnavailable, Type: "no_access_token", Message: "no access token: " + redactValue(err.Error(), tok)})
		return
	}
	t.c.lastTok.Store(&tok)
	t.call(Credential{Value: tok, Token: true}, t.onDelta, func(err error) { t.tokenDone(attempt, tok, err) })
}

// tokenDone takes the outcome of a call with tok: a token refused for auth is tried
// once more fresh; one refused otherwise rests (it stands for the provider's one slot).
func (t *try) tokenDone(attempt int, tok string, err error) {
	if err == nil {
		t.done(nil)
		return
	}
	c := t.c
	reason, d, le, ok := keyFailure(err)
	switch {
	case !ok:
		t.done(err)
		return
	case reason == Auth:
		c.tok.Rejected(tok)
		if attempt == 0 && !t.sent {
			t.token(1)
			return
		}
		// Not rested: a renewed token is used by the next call at once.
		if c.rot.FirstTelling(0) {
			c.rot.Log().Warn("model: the provider refused the access token, also after a fresh one",
				"provider", c.provider, "key", tokenSlot, "kind", string(reason), "status", le.Status)
		}
		t.done(err)
		return
	}
	t.rests[0] = Rest{Left: d, Reason: reason}
	c.rot.CoolDown(t.ctx, 0, reason, d, le.Status)
	if t.sent {
		t.done(err)
		return
	}
	t.done(c.exhausted(t.rests, err))
}

// keyFailure reports whether err is the provider refusing the credential, why, for
// how long it rests, and the provider's error.
func keyFailure(err error) (Kind, time.Duration, *llm.Error, bool) {
	var le *llm.Error
	if !errors.As(err, &le) {
		return "", 0, nil, false
	}
	// The provider layer's one classification (OpenAI's insufficient_quota on a 429:
	// the key's money is spent, waiting won't help).
	reason := Classify(le.Status, []byte(le.Type+" "+le.Code))
	if !reason.Refused() {
		return "", 0, nil, false
	}
	return reason, RestFor(reason, le.RetryAfter), le, true
}

// exhausted is the error of a call left without a usable key: a retryable 429 whose
// RetryAfter is the soonest rest when the first key back rests for rate limiting
// (last, the provider's own error, when it was one), else last or the refusal.
func (c *Credentials) exhausted(rests []Rest, last error) error {
	if c.cool == nil && last != nil {
		return last // nothing rests between calls: the provider's own error says it all
	}
	soon := Soonest(rests)
	if soon.Reason == RateLimited || soon.Reason == "" {
		var le *llm.Error
		if errors.As(last, &le) && le.Status == http.StatusTooManyRequests {
			e := *le
			e.RetryAfter = soon.Left
			return &e
		}
		return &llm.Error{Provider: c.provider, Status: http.StatusTooManyRequests, Type: "rate_limited", RetryAfter: soon.Left,
			Message: "every API key of this provider is cooling down (" + soon.Left.Round(time.Second).String() + " left)"}
	}
	if last != nil {
		return last
	}
	status := http.StatusUnauthorized
	if soon.Reason == Quota {
		status = http.StatusPaymentRequired
	}
	return &llm.Error{Provider: c.provider, Status: status, Type: string(soon.Reason),
		Message: "every API key of this provider was refused (" + string(soon.Reason) + "); they rest " + soon.Left.Round(time.Second).String()}
}

// Redact removes every key and the last token from s.
func (c *Credentials) Redact(s string) string {
	for _, k := range c.keys {
		s = redactValue(s, k)
	}
	if t := c.lastTok.Load(); t != nil {
		s = redactValue(s, *t)
	}
	return s
}

func redactValue(s, v string) string { return Redact(s, v) }
