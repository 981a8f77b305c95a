package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// receiver is a webhook endpoint that answers each delivery with the status reply
// chooses for it (by its number, from 1) and keeps every request for verification.
type receiver struct {
	URL   string
	mu    sync.Mutex
	reply func(n int) int
	got   []received
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, reply func(n int) int) *receiver {
	r := &receiver{reply: reply}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		code := r.reply(len(r.got))
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/hooks/searchfleet"
	return r
}

func (r *receiver) deliveries() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// verify checks every delivery received with the Standard Webhooks reference library
// and returns their webhook-ids.
func (r *receiver) verify(t *testing.T, secret string) []string {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, d := range r.deliveries() {
		if err := wh.Verify(d.body, d.header); err != nil {
			t.Errorf("delivery %d does not verify: %v", i+1, err)
		}
		ids = append(ids, d.header.Get("webhook-id"))
	}
	return ids
}

// do sends a request to ingress as the holder of apiKey ("" on an open API).
func do(t *testing.T, f *fleettest.Fleet, apiKey, method, path string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	if body == nil {
		b = nil
	}
	req, _ := http.NewRequest(method, f.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// callbackJob submits a job that searches, with a callback to url, and returns its id
// and the 202 body's webhook_secret.
func callbackJob(t *testing.T, f *fleettest.Fleet, apiKey, url string) (id, secret string) {
	t.Helper()
	status, body := do(t, f, apiKey, "POST", "/v1/jobs", map[string]any{
		"model": demo.Model, "messages": []any{user("Find the latest news about AI")},
		"callback": map[string]any{"url": url, "events": []string{"completed", "failed"}},
	})
	if status != http.StatusAccepted {
		t.Fatalf("POST /v1/jobs: %d %s", status, body)
	}
	var v map[string]any
	json.Unmarshal(body, &v)
	id, _ = v["id"].(string)
	secret, _ = v["webhook_secret"].(string)
	return id, secret
}

// webhookStatus is the job's webhook_status as GET /v1/jobs/{id} shows it, and the
// body it came in.
func webhookStatus(t *testing.T, f *fleettest.Fleet, apiKey, id string) (string, []byte) {
	t.Helper()
	_, body := do(t, f, apiKey, "GET", "/v1/jobs/"+id, nil)
	var v map[string]any
	json.Unmarshal(body, &v)
	s, _ := v["webhook_status"].(string)
	return s, body
}

func waitWebhookStatus(t *testing.T, f *fleettest.Fleet, apiKey, id, want string) []byte {
	t.Helper()
	var body []byte
	fleettest.Eventually(t, "webhook_status "+want, func() bool {
		var st string
		st, body = webhookStatus(t, f, apiKey, id)
		return st == want
	})
	return body
}

// secretNotIn fails if the secret (or its key) is in any of the texts.
func secretNotIn(t *testing.T, secret string, texts map[string]string) {
	t.Helper()
	key := strings.TrimPrefix(secret, webhook.SecretPrefix)
	for what, s := range texts {
		if strings.Contains(s, key) {
			t.Errorf("%s contains the webhook secret", what)
		}
	}
}

// (a) A job with a callback is delivered once it completes: signed so the reference
// library verifies it, in the Standard Webhooks structure, with the job's answer.
func TestWebhookDelivered(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	r := newReceiver(t, func(int) int { return http.StatusNoContent })
	id, secret := callbackJob(t, f, "", r.URL)
	if secret == "" {
		t.Fatal("no webhook_secret in the 202 answer")
	}
	waitWebhookStatus(t, f, "", id, "delivered")
	ids := r.verify(t, secret)
	if len(ids) != 1 || ids[0] != "msg_"+id+"_completed" {
		t.Fatalf("webhook-ids %v", ids)
	}
	var p struct {
		Type      string         `json:"type"`
		Timestamp time.Time      `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.deliveries()[0].body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != "job.completed" || p.Timestamp.IsZero() || p.Data["id"] != id || p.Data["object"] != "job" || p.Data["status"] != "completed" {
		t.Errorf("payload %s", r.deliveries()[0].body)
	}
	resp, _ := p.Data["response"].(map[string]any)
	if c := fleettest.Content(resp); !strings.Contains(c, "[1]") {
		t.Errorf("the payload's answer does not cite: %q", c)
	}
	if trace, _ := p.Data["trace"].([]any); len(trace) != 1 {
		t.Errorf("payload trace %v", p.Data["trace"])
	}
	// The terminal event's copy of the job (its callback with it) is the finisher's:
	// the job's event stream leaves it out.
	resp2, err := (&http.Client{Timeout: 20 * time.Second}).Get(f.URL + "/v1/jobs/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if !strings.Contains(string(stream), "event: completed") || strings.Contains(string(stream), "/hooks/searchfleet") || strings.Contains(string(stream), `"job":`) {
		t.Errorf("event stream %s", stream)
	}
}

// (b) A receiver that fails the first three attempts gets the event on the fourth,
// with the same webhook-id every time, and the job ends delivered.
func TestWebhookRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	r := newReceiver(t, func(n int) int {
		if n <= 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	id, secret := callbackJob(t, f, "", r.URL)
	waitWebhookStatus(t, f, "", id, "delivered")
	ids := r.verify(t, secret)
	if len(ids) != 4 {
		t.Fatalf("%d deliveries, want 4", len(ids))
	}
	for _, got := range ids {
		if got != ids[0] || got != "msg_"+id+"_completed" {
			t.Errorf("webhook-ids %v: not one stable id", ids)
			break
		}
	}
	for i, d := range r.deliveries()[1:] {
		if !bytes.Equal(d.body, r.deliveries()[0].body) {
			t.Errorf("retry %d sent another body", i+1)
		}
	}
}

// (c) A receiver down past the whole schedule leaves the job visibly webhook_failed
// and the delivery in the DLQ; neither the job record nor the dead letter's reason
// holds the secret.
func TestWebhookFailedToDLQ(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	r := newReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	id, secret := callbackJob(t, f, "", r.URL)
	body := waitWebhookStatus(t, f, "", id, "failed")
	if n := len(r.verify(t, secret)); n != len(f.Env.WebhookSchedule)+1 {
		t.Errorf("%d deliveries, want %d", n, len(f.Env.WebhookSchedule)+1)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, f.NATS, t.Name(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var reason string
	fleettest.Eventually(t, "the delivery in the DLQ", func() bool {
		cons, err := b.RawJetStream().OrderedConsumer(ctx, bus.StreamDLQ, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{bus.SubjectDLQ(bus.StreamWebhooks, bus.ConsumerWebhooks)}})
		if err != nil {
			return false
		}
		msgs, err := cons.FetchNoWait(100)
		if err != nil {
			return false
		}
		for m := range msgs.Messages() {
			d, _, err := bus.Decode[bus.WebhookDelivery](m.Data())
			if err == nil && d.JobID == id && d.ID == "msg_"+id+"_completed" {
				reason = m.Headers().Get(bus.HeaderDLQReason)
				return true
			}
		}
		return false
	})
	if !strings.Contains(reason, "503") {
		t.Errorf("dead letter reason %q does not say why", reason)
	}
	hash, _ := f.Store.Jobs.JobFields(t.Context(), id)
	record, _ := json.Marshal(hash)
	secretNotIn(t, secret, map[string]string{"GET /v1/jobs/{id}": string(body), "the Redis job hash": string(record), "the DLQ reason": reason})
}

// (d) 410 Gone stops retries: one delivery, and the webhook is disabled.
func TestWebhookGoneStopsRetries(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	r := newReceiver(t, func(int) int { return http.StatusGone })
	id, secret := callbackJob(t, f, "", r.URL)
	waitWebhookStatus(t, f, "", id, "disabled")
	// Absence takes waiting: longer than the whole retry schedule.
	var total time.Duration
	for _, d := range f.Env.WebhookSchedule {
		total += d
	}
	time.Sleep(total + 500*time.Millisecond)
	if n := len(r.verify(t, secret)); n != 1 {
		t.Errorf("%d deliveries after 410, want 1", n)
	}
	if st, _ := webhookStatus(t, f, "", id); st != "disabled" {
		t.Errorf("webhook_status %q", st)
	}
}

// (e) A tenant with a signing secret has its jobs signed with it (and no secret in
// the 202 answer); a tenant without gets a secret per job, shown once in the 202
// answer, which verifies the delivery and is in neither the job's API view nor its
// Redis record.
func TestWebhookSecrets(t *testing.T) {
	t.Parallel()
	// The secrets are given resolved, as config.File.Resolve fills them: no environment.
	tenantSecret := webhook.NewSecret()
	f := fleettest.Start(t, fleettest.File(func(f *config.File) {
		f.Tenants = append(f.Tenants,
			config.Tenant{ID: "acme", APIKeyEnv: "WHTEST_ACME_KEY", WebhookSecretEnv: "WHTEST_ACME_WHSEC", APIKeys: []string{"acme-key"}, WebhookSecret: tenantSecret},
			config.Tenant{ID: "plain", APIKeyEnv: "WHTEST_PLAIN_KEY", APIKeys: []string{"plain-key"}})
	}))

	acme := newReceiver(t, func(int) int { return http.StatusOK })
	acmeJob, acmeSecret := callbackJob(t, f, "acme-key", acme.URL)
	if acmeSecret != "" {
		t.Errorf("a per-job secret was given to a tenant with its own")
	}
	plain := newReceiver(t, func(int) int { return http.StatusOK })
	plainJob, jobSecret := callbackJob(t, f, "plain-key", plain.URL)
	if !strings.HasPrefix(jobSecret, webhook.SecretPrefix) {
		t.Fatalf("webhook_secret %q", jobSecret)
	}

	waitWebhookStatus(t, f, "acme-key", acmeJob, "delivered")
	plainBody := waitWebhookStatus(t, f, "plain-key", plainJob, "delivered")
	if ids := acme.verify(t, tenantSecret); len(ids) != 1 {
		t.Errorf("tenant deliveries %v", ids)
	}
	if ids := plain.verify(t, jobSecret); len(ids) != 1 {
		t.Errorf("per-job deliveries %v", ids)
	}
	// Each secret verifies only its own deliveries.
	other, _ := standardwebhooks.NewWebhook(tenantSecret)
	if d := plain.deliveries()[0]; other.Verify(d.body, d.header) == nil {
		t.Error("the tenant's secret verifies a job of another tenant")
	}
	hash, _ := f.Store.Jobs.JobFields(t.Context(), plainJob)
	record, _ := json.Marshal(hash)
	_, acmeBody := webhookStatus(t, f, "acme-key", acmeJob)
	acmeHash, _ := f.Store.Jobs.JobFields(t.Context(), acmeJob)
	acmeRecord, _ := json.Marshal(acmeHash)
	secretNotIn(t, jobSecret, map[string]string{"GET /v1/jobs/{id}": string(plainBody), "the Redis job hash": string(record)})
	secretNotIn(t, tenantSecret, map[string]string{"GET /v1/jobs/{id}": string(acmeBody), "the Redis job hash": string(acmeRecord)})
}
