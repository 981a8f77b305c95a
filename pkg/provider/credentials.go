package provider

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
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
	c := &Credentials{provider: name, tok: o.Token, keys: slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == "" })}
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

// Try runs call with a usable credential, and with the next one while the provider
// refuses the credential (see Credentials), and returns the outcome of the last call.
// call makes one request with cred; it gets onDelta wrapped: once it has passed text
// on, a refused call is not tried again (the text was streamed).
func (c *Credentials) Try(ctx context.Context, onDelta func(llm.Delta), call func(Credential, func(llm.Delta)) error) error {
	rests := c.rot.Resting(ctx)
	sent := false
	if onDelta != nil {
		pass := onDelta
		onDelta = func(d llm.Delta) { sent = true; pass(d) }
	}
	if c.tok != nil {
		return c.tryToken(ctx, rests, &sent, func(cred Credential) error { return call(cred, onDelta) })
	}
	start, n := c.rot.Start(), len(c.keys)
	var last error // the last refusal
	for j := range n {
		i := (start + j) % n
		if rests[i].Left > 0 {
			continue
		}
		err := call(Credential{Value: c.keys[i]}, onDelta)
		if err == nil {
			return nil
		}
		last = err
		reason, d, le, ok := keyFailure(err)
		if !ok {
			return err
		}
		rests[i] = Rest{Left: d, Reason: reason}
		c.rot.CoolDown(ctx, i, reason, d, le.Status)
		if sent {
			return err
		}
	}
	return c.exhausted(rests, last)
}

// tryToken calls with the token source's current token, and once more with a fresh
// one when the provider refuses it for auth; a token refused otherwise rests (it
// stands for the provider's one slot).
func (c *Credentials) tryToken(ctx context.Context, rests []Rest, sent *bool, call func(Credential) error) error {
	if rests[0].Left > 0 {
		return c.exhausted(rests, nil)
	}
	for attempt := 0; ; attempt++ {
		tok, err := c.tok.Token(ctx)
		if err != nil {
			// Retryable: a file being rewritten, a command that failed once.
			return &llm.Error{Provider: c.provider, Status: http.StatusServiceUnavailable, Type: "no_access_token", Message: "no access token: " + Redact(err.Error(), tok)}
		}
		c.lastTok.Store(&tok)
		err = call(Credential{Value: tok, Token: true})
		if err == nil {
			return nil
		}
		reason, d, le, ok := keyFailure(err)
		switch {
		case !ok:
			return err
		case reason == Auth:
			c.tok.Rejected(tok)
			if attempt == 0 && !*sent {
				continue
			}
			// Not rested: a renewed token is used by the next call at once.
			if c.rot.FirstTelling(0) {
				c.rot.o.Log.Warn("model: the provider refused the access token, also after a fresh one",
					"provider", c.provider, "key", tokenSlot, "kind", string(reason), "status", le.Status)
			}
			return err
		}
		rests[0] = Rest{Left: d, Reason: reason}
		c.rot.CoolDown(ctx, 0, reason, d, le.Status)
		if *sent {
			return err
		}
		return c.exhausted(rests, err)
	}
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
	if c.rot.o.Cooldowns == nil && last != nil {
		return last // nothing rests between calls: the provider's own error says it all
	}
	soon := Soonest(rests)
	if soon.Reason == RateLimited || soon.Reason == "" {
		if le, ok := errors.AsType[*llm.Error](last); ok && le.Status == http.StatusTooManyRequests {
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
	s = Redact(s, c.keys...)
	if t := c.lastTok.Load(); t != nil {
		s = Redact(s, *t)
	}
	return s
}
