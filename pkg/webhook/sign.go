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

// ErrBadSecret means a signing secret is not "whsec_" followed by base64. It never
// carries the secret.
var ErrBadSecret = errors.New("the webhook signing secret is not whsec_ followed by a base64 key")

// NewSecret makes a random signing secret ("whsec_" + base64 of 32 random bytes).
func NewSecret() string {
	b := make([]byte, secretBytes)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// secretKey returns the HMAC key of a secret: the base64 after the whsec_ prefix.
func secretKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// CheckSecret reports whether secret is a usable signing secret, without saying what
// it is.
func CheckSecret(secret string) error {
	_, err := secretKey(secret)
	return err
}

// Sign returns the webhook-signature header value for one attempt: "v1," and the
// base64 HMAC-SHA256, keyed by the secret, of "id.timestamp.body" (timestamp in unix
// seconds).
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, ts.Unix(), 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
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
