package webhook

import (
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The spec's test vector: secret, id, timestamp and body with their known signature.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// Our signature of a known secret, id, timestamp and body is the reference library's,
// and the spec's.
func TestSignMatchesReference(t *testing.T) {
	t.Parallel()
	ts := time.Unix(vectorTimestamp, 0)
	got, err := Sign(vectorSecret, vectorID, ts, []byte(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := standardwebhooks.NewWebhook(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Sign(vectorID, ts, []byte(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Sign = %s, reference library signs %s", got, want)
	}
	if got != vectorSignature {
		t.Errorf("Sign = %s, the spec's vector is %s", got, vectorSignature)
	}
}

// The reference library's Verify accepts the headers we send, for the vector's secret
// and for a secret NewSecret made, and refuses them under another secret or body.
func TestReferenceVerifiesOurHeaders(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"job.completed","timestamp":"2026-01-02T03:04:05Z","data":{"id":"job_x"}}`)
	for _, secret := range []string{vectorSecret, NewSecret()} {
		h := http.Header{}
		if err := SetHeaders(h, secret, "msg_job_x_completed", time.Now(), body); err != nil {
			t.Fatal(err)
		}
		if h.Get("Content-Type") != "application/json" {
			t.Errorf("content type %q", h.Get("Content-Type"))
		}
		ref, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := ref.Verify(body, h); err != nil {
			t.Errorf("reference Verify: %v", err)
		}
		if err := ref.Verify([]byte(`{"tampered":true}`), h); err == nil {
			t.Error("reference Verify accepted another body")
		}
		other, _ := standardwebhooks.NewWebhook(NewSecret())
		if err := other.Verify(body, h); err == nil {
			t.Error("another secret verified the signature")
		}
	}
}

// NewSecret makes distinct whsec_ secrets of 32-byte keys.
func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, b := NewSecret(), NewSecret()
	if a == b || !strings.HasPrefix(a, SecretPrefix) {
		t.Fatalf("secrets %q %q", a, b)
	}
	key, err := secretKey(a)
	if err != nil || len(key) != secretBytes {
		t.Fatalf("key of %d bytes, %v", len(key), err)
	}
}

// A malformed secret is an error that does not repeat the secret.
func TestBadSecretNotInError(t *testing.T) {
	t.Parallel()
	bad := "whsec_not*base64*SUPERSECRET"
	_, err := Sign(bad, "msg_1", time.Now(), []byte("{}"))
	if err == nil {
		t.Fatal("a malformed secret signed")
	}
	if strings.Contains(err.Error(), "SUPERSECRET") {
		t.Errorf("error repeats the secret: %v", err)
	}
	if err := (Config{TenantSecrets: map[string]string{"acme": bad}}).Validate(); err == nil || strings.Contains(err.Error(), "SUPERSECRET") || !strings.Contains(err.Error(), "acme") {
		t.Errorf("Validate: %v", err)
	}
}
