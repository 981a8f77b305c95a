package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret; the rest is the key in standard base64.
const SecretPrefix = "whsec_"

// secretBytes is the size of the keys NewSecret makes: 32 bytes, the size of an
// HMAC-SHA256 output and inside the 24–64 bytes the spec recommends.
const secretBytes = 32

// MinSecretBytes is the shortest key a signing secret may have: the Standard Webhooks
// recommendation (24 to 64 bytes). A shorter key is guessable from signed deliveries.
const MinSecretBytes = 24

// ErrBadSecret means a signing secret is not "whsec_" followed by base64 of at least
// MinSecretBytes bytes. It never carries the secret.
var ErrBadSecret = errors.New("the webhook signing secret is not whsec_ followed by a base64 key of at least 24 bytes")

// NewSecret makes a random signing secret ("whsec_" + base64 of 32 random bytes).
func NewSecret() string {
	b := make([]byte, secretBytes)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// A tenant's secret may be several secrets separated by spaces, the newest first
// ("whsec_new whsec_old"): while a secret is rotated, every delivery carries one
// signature per secret in its webhook-signature header, as Standard Webhooks allows,
// so a receiver verifying with either secret accepts it. Config.SecretOverlapUntil
// ends the overlap: from then on only the first secret signs.

// secretKeys returns the HMAC keys of secret (one, or several separated by spaces):
// each the base64 after the whsec_ prefix, at least MinSecretBytes long.
func secretKeys(secret string) ([][]byte, error) {
	fields := strings.Fields(secret)
	if len(fields) == 0 {
		return nil, ErrBadSecret
	}
	keys := make([][]byte, len(fields))
	for i, f := range fields {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(f, SecretPrefix))
		if err != nil || len(key) < MinSecretBytes {
			return nil, ErrBadSecret
		}
		keys[i] = key
	}
	return keys, nil
}

// CheckSecret reports whether secret (one, or several separated by spaces) is usable
// for signing, without saying what it is.
func CheckSecret(secret string) error {
	_, err := secretKeys(secret)
	return err
}

// Sign returns the webhook-signature header value for one attempt: for each secret
// (several separated by spaces during a rotation), "v1," and the base64 HMAC-SHA256,
// keyed by it, of "id.timestamp.body" (timestamp in unix seconds), separated by
// spaces.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	keys, err := secretKeys(secret)
	if err != nil {
		return "", err
	}
	sigs := make([]string, len(keys))
	for i, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write(strconv.AppendInt(nil, ts.Unix(), 10))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	return strings.Join(sigs, " "), nil
}

// tenantSecret is the secret a tenant's deliveries are signed with at now: all of its
// secrets during a rotation's overlap (SecretOverlapUntil unset or ahead), the newest
// alone after it. "" when the tenant has none.
func (c Config) tenantSecret(tenant string, now time.Time) string {
	sec := c.TenantSecrets[tenant]
	if until, ok := c.SecretOverlapUntil[tenant]; ok && !now.Before(until) {
		if f := strings.Fields(sec); len(f) > 0 {
			return f[0]
		}
	}
	return sec
}

// SetHeaders sets the Standard Webhooks headers of one attempt, and the JSON content
// type, on h.
func SetHeaders(h http.Header, secret, id string, ts time.Time, body []byte) error {
	sig, err := Sign(secret, id, ts, body)
	if err != nil {
		return err
	}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return nil
}
