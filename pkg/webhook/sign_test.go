package webhook

import (
	"encoding/base64"
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
	keys, err := secretKeys(a)
	if err != nil || len(keys) != 1 || len(keys[0]) != secretBytes {
		t.Fatalf("keys %d, %v", len(keys), err)
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

// A key shorter than 24 bytes is refused wherever a secret is taken: at start
// (Config.Validate) and when signing; 24 bytes and more are accepted.
func TestShortSecretsRefused(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 16, 23} {
		short := SecretPrefix + base64.StdEncoding.EncodeToString(make([]byte, n))
		if err := (Config{TenantSecrets: map[string]string{"acme": short}}).Validate(); err == nil {
			t.Errorf("a %d-byte key passes Validate", n)
		}
		if _, err := Sign(short, "msg_1", time.Now(), []byte("{}")); err == nil {
			t.Errorf("a %d-byte key signs", n)
		}
		if err := CheckSecret(NewSecret() + " " + short); err == nil {
			t.Errorf("a rotation with a %d-byte old key passes", n)
		}
	}
	for _, n := range []int{24, 32, 64} {
		ok := SecretPrefix + base64.StdEncoding.EncodeToString(make([]byte, n))
		if err := CheckSecret(ok); err != nil {
			t.Errorf("a %d-byte key is refused: %v", n, err)
		}
	}
}

// Rotation: while a tenant's entry holds the new and the old secret, every delivery
// carries a signature of each, and the reference library verifies it with either;
// after the overlap ends, only with the new one.
func TestSecretRotationOverlap(t *testing.T) {
	t.Parallel()
	newSec, oldSec := NewSecret(), NewSecret()
	body := []byte(`{"type":"job.completed","data":{"id":"job_x"}}`)
	end := time.Now().Add(time.Hour)
	c := Config{TenantSecrets: map[string]string{"acme": newSec + " " + oldSec}, SecretOverlapUntil: map[string]time.Time{"acme": end}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	verifies := func(at time.Time) (withNew, withOld bool) {
		h := http.Header{}
		if err := SetHeaders(h, c.tenantSecret("acme", at), "msg_job_x_completed", time.Now(), body); err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{newSec, oldSec} {
			ref, err := standardwebhooks.NewWebhook(sec)
			if err != nil {
				t.Fatal(err)
			}
			ok := ref.Verify(body, h) == nil
			if sec == newSec {
				withNew = ok
			} else {
				withOld = ok
			}
		}
		return withNew, withOld
	}
	if n, o := verifies(end.Add(-time.Minute)); !n || !o {
		t.Errorf("during the overlap: verifies with new %v, with old %v; want both", n, o)
	}
	if n, o := verifies(end); !n || o {
		t.Errorf("after the overlap: verifies with new %v, with old %v; want the new only", n, o)
	}
	// Without an end, the overlap lasts as long as both are configured.
	c.SecretOverlapUntil = nil
	if n, o := verifies(end.Add(time.Hour)); !n || !o {
		t.Errorf("open overlap: verifies with new %v, with old %v; want both", n, o)
	}
}
