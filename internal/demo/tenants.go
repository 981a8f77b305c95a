package demo

import (
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/spend"
)

// The demo tenants of `make demo`: two API keys, so a user sees each tenant's own jobs
// and limits, a small search budget to run out of, and signed webhooks. The keys are
// printed in the start-up banner; they are for a fleet on 127.0.0.1 only.
const (
	AliceKey = "sk-demo-alice"
	BobKey   = "sk-demo-bob"
	// BobSearchesPerDay is Bob's daily search budget: small, so the budget's 429 is
	// seen after a few questions.
	BobSearchesPerDay = 3
)

// AliceWebhookSecret signs Alice's webhooks (Standard Webhooks: whsec_ and base64 of
// 32 bytes). It is public: the demo's receiver verifies with it.
var AliceWebhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("searchfleet demo webhook secret!"))

// AddTenants adds the demo tenants to f: alice (signed webhooks, 50 searches a day)
// and bob (BobSearchesPerDay searches a day). Their keys are set directly, not through
// the environment.
func AddTenants(f *config.File) {
	f.Tenants = append(f.Tenants,
		config.Tenant{ID: "alice", APIKeyEnv: "DEMO_ALICE_API_KEY", APIKeys: []string{AliceKey},
			WebhookSecretEnv: "DEMO_ALICE_WEBHOOK_SECRET", WebhookSecret: AliceWebhookSecret,
			Budget: &spend.Budget{SearchesPerDay: 50}},
		config.Tenant{ID: "bob", APIKeyEnv: "DEMO_BOB_API_KEY", APIKeys: []string{BobKey},
			Budget: &spend.Budget{SearchesPerDay: BobSearchesPerDay}},
	)
}

// Receiver serves a webhook receiver on 127.0.0.1 that verifies every delivery with
// secret and logs it: the demo's callback URL. close stops it.
func Receiver(secret string, log *slog.Logger) (url string, close func(), err error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			log.Warn("demo webhook receiver: a delivery failed verification", "webhook_id", r.Header.Get("webhook-id"))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		log.Info("demo webhook receiver: a delivery verified", "webhook_id", r.Header.Get("webhook-id"), "bytes", len(body))
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/hooks", func() { srv.Close() }, nil
}
