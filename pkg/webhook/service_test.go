package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// syncBuffer is a log sink tests read while handlers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// harness is a Service on a real JetStream server and the Redis store over miniredis
// (redistest), with its logs captured, and a receiver that answers with the status its reply function
// chooses and keeps every request.
type harness struct {
	s     *Service
	store *state.Store         // the service's store, to put jobs in
	redis *miniredis.Miniredis // under it, to break what it stored
	logs  *syncBuffer
	url   string

	mu    sync.Mutex
	reply func(n int) int
	hits  []hit
}

type hit struct {
	header http.Header
	body   []byte
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	b, _ := bustest.New(t)
	store, mr := redistest.New(t)
	h := &harness{store: store, redis: mr, logs: &syncBuffer{}, reply: func(int) int { return http.StatusOK }}
	srv := httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hook?token=q-secret"
	cfg.Allow = append(cfg.Allow, netip.MustParsePrefix("127.0.0.0/8"))
	if cfg.Schedule == nil {
		cfg.Schedule = []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	}
	h.s = &Service{Bus: b, Store: store.Webhooks, Config: cfg, Metrics: metrics.New(),
		Log: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	return h
}

func (h *harness) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.hits = append(h.hits, hit{header: r.Header.Clone(), body: body})
	code := h.reply(len(h.hits))
	h.mu.Unlock()
	w.WriteHeader(code)
}

func (h *harness) received() []hit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hit(nil), h.hits...)
}

// finishedJob registers a callback for a new job of tenant, stores the job and ends
// it as completed; it returns the job and the secret ParseCallback gave out.
func (h *harness) finishedJob(t *testing.T, tenant string, callback map[string]any) (*state.Job, string) {
	t.Helper()
	ctx := t.Context()
	id := "job_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name())) + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if callback == nil {
		callback = map[string]any{"url": h.url}
	}
	raw, _ := json.Marshal(callback)
	stored, secret, err := h.s.ParseCallback(ctx, tenant, id, raw)
	if err != nil {
		t.Fatal(err)
	}
	job := &state.Job{ID: id, Tenant: tenant, Kind: "chat", Model: "sim-model", Request: json.RawMessage(`{}`), Callback: stored}
	if err := h.store.Jobs.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	answer, err := wire.EncodeAnswer(&wire.Response{Model: "sim-model", Status: wire.StatusCompleted, Stop: wire.StopEndTurn,
		Content: []wire.Part{{Kind: wire.PartText, Text: "forty-two"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Jobs.Finish(ctx, id, state.Completed, "response", answer); err != nil {
		t.Fatal(err)
	}
	job, err = h.store.Jobs.GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return job, secret
}

// enqueued returns the deliveries waiting on the WEBHOOKS stream (a work queue: read
// by sequence, not through a consumer).
func enqueued(t *testing.T, s *Service) []bus.WebhookDelivery {
	t.Helper()
	ctx := t.Context()
	st, err := s.Bus.RawJetStream().Stream(ctx, bus.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []bus.WebhookDelivery
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		d, _, err := bus.Decode[bus.WebhookDelivery](m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// jobEvents returns the types of a job's lifecycle events.
func jobEvents(t *testing.T, s *Service, id string) []bus.EventType {
	t.Helper()
	c, err := s.Bus.RawJetStream().OrderedConsumer(t.Context(), bus.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.SubjectJobEvents(id)}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	var out []bus.EventType
	for m := range batch.Messages() {
		ev, _, err := bus.Decode[bus.Event](m.Data())
		if err == nil {
			out = append(out, ev.Type)
		}
	}
	return out
}

func attempt(d bus.WebhookDelivery, n int) *bus.Delivery[bus.WebhookDelivery] {
	return &bus.Delivery[bus.WebhookDelivery]{Msg: d, ID: d.MsgID(), Subject: bus.SubjectWebhook, Attempt: n, MaxDeliver: 12}
}

func webhookStatus(t *testing.T, s *Service, id string) string {
	t.Helper()
	st, err := s.Store.JobWebhookStatus(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// verifyAll checks every request with the reference library and returns the ids.
func verifyAll(t *testing.T, hits []hit, secret string) []string {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, h := range hits {
		if err := wh.Verify(h.body, h.header); err != nil {
			t.Errorf("request %d does not verify: %v", i+1, err)
		}
		if ct := h.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("request %d content type %q", i+1, ct)
		}
		ids = append(ids, h.header.Get(HeaderID))
	}
	return ids
}

// noSecret fails if any of the texts contains the secret or its key.
func noSecret(t *testing.T, secret string, texts map[string]string) {
	t.Helper()
	key := strings.TrimPrefix(secret, SecretPrefix)
	for what, s := range texts {
		if strings.Contains(s, key) {
			t.Errorf("%s contains the signing secret", what)
		}
	}
}

// A finished job enqueues one delivery however often its finish is replayed; the
// payload is the Standard Webhooks structure around the job; a 2xx delivers it,
// signed so the reference library verifies it, and a redelivery after that sends
// nothing more.
func TestJobFinishedDelivers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	job, secret := h.finishedJob(t, "default", nil)
	if secret == "" || !strings.HasPrefix(secret, SecretPrefix) {
		t.Fatalf("no per-job secret: %q", secret)
	}
	h.s.JobFinished(t.Context(), job)
	h.s.JobFinished(t.Context(), job)
	ds := enqueued(t, h.s)
	if len(ds) != 1 {
		t.Fatalf("%d deliveries enqueued, want 1", len(ds))
	}
	d := ds[0]
	if d.ID != "msg_"+job.ID+"_completed" || d.Event != "job.completed" || d.JobID != job.ID || d.URL != h.url {
		t.Errorf("delivery %+v", d)
	}
	var p struct {
		Type      string         `json:"type"`
		Timestamp time.Time      `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != "job.completed" || p.Timestamp.IsZero() || p.Data["id"] != job.ID || p.Data["object"] != "job" || p.Data["status"] != "completed" {
		t.Errorf("payload %s", d.Payload)
	}
	var answer struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if r, _ := json.Marshal(p.Data["response"]); json.Unmarshal(r, &answer) != nil || answer.Object != "chat.completion" ||
		len(answer.Choices) != 1 || answer.Choices[0].Message.Content != "forty-two" {
		t.Errorf("payload response %v", p.Data["response"])
	}
	if st := webhookStatus(t, h.s, job.ID); st != StatusPending {
		t.Errorf("webhook status %q before delivery", st)
	}

	if err := h.s.Handle(t.Context(), attempt(d, 1)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if err := h.s.Handle(t.Context(), attempt(d, 2)); err != nil {
		t.Fatalf("Handle of a redelivery: %v", err)
	}
	hits := h.received()
	if len(hits) != 1 {
		t.Fatalf("%d requests, want 1", len(hits))
	}
	if ids := verifyAll(t, hits, secret); ids[0] != d.ID {
		t.Errorf("webhook-id %q", ids[0])
	}
	if !bytes.Equal(hits[0].body, d.Payload) {
		t.Errorf("body %s differs from the enqueued payload", hits[0].body)
	}
	if st := webhookStatus(t, h.s, job.ID); st != StatusDelivered {
		t.Errorf("webhook status %q", st)
	}
	if evs := jobEvents(t, h.s, job.ID); !containsEvent(evs, bus.EventWebhookSent) {
		t.Errorf("events %v", evs)
	}
	if n := testutil.ToFloat64(h.s.Metrics.Webhooks.WithLabelValues("delivered")); n != 1 {
		t.Errorf("delivered counted %v times", n)
	}
	// Finishing again after delivery enqueues nothing and keeps the status.
	job, _ = h.store.Jobs.GetJob(t.Context(), job.ID)
	h.s.JobFinished(t.Context(), job)
	if st := webhookStatus(t, h.s, job.ID); st != StatusDelivered {
		t.Errorf("webhook status %q after a replayed finish", st)
	}
}

func containsEvent(evs []bus.EventType, want bus.EventType) bool {
	for _, e := range evs {
		if e == want {
			return true
		}
	}
	return false
}

// A failing receiver is retried on the schedule with the same webhook-id, a fresh
// timestamp and signature each time; after the last try the job is webhook_failed
// and the delivery is dead-lettered. No error, log line or job field carries the
// secret.
func TestHandleRetriesThenFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	h.reply = func(int) int { return http.StatusInternalServerError }
	job, secret := h.finishedJob(t, "default", nil)
	h.s.JobFinished(t.Context(), job)
	d := enqueued(t, h.s)[0]

	var errs []string
	for n := 1; n <= 4; n++ {
		err := h.s.Handle(t.Context(), attempt(d, n))
		errs = append(errs, err.Error())
		dec := bus.Decide(err, n, 12)
		if n <= 3 {
			if dec.Action != bus.Nak || dec.Delay != h.s.Config.Schedule[n-1] {
				t.Errorf("attempt %d: %v after %v, want nak after %v", n, dec.Action, dec.Delay, h.s.Config.Schedule[n-1])
			}
			if st := webhookStatus(t, h.s, job.ID); st != StatusPending {
				t.Errorf("attempt %d: webhook status %q", n, st)
			}
			continue
		}
		if dec.Action != bus.TermDLQ {
			t.Errorf("last attempt: %v, want term+dlq", dec.Action)
		}
		errs = append(errs, dec.Reason)
	}
	ids := verifyAll(t, h.received(), secret)
	if len(ids) != 4 {
		t.Fatalf("%d requests, want 4", len(ids))
	}
	for _, id := range ids {
		if id != d.ID {
			t.Errorf("webhook-ids %v, want %s every time", ids, d.ID)
		}
	}
	if st := webhookStatus(t, h.s, job.ID); st != StatusFailed {
		t.Errorf("webhook status %q, want failed", st)
	}
	if evs := jobEvents(t, h.s, job.ID); !containsEvent(evs, bus.EventWebhookFailed) {
		t.Errorf("events %v", evs)
	}
	if r, f := testutil.ToFloat64(h.s.Metrics.Webhooks.WithLabelValues("retry")), testutil.ToFloat64(h.s.Metrics.Webhooks.WithLabelValues("failed")); r != 3 || f != 1 {
		t.Errorf("metrics: %v retries, %v failed", r, f)
	}
	// The dead letter's handler changes nothing more.
	if err := h.s.DeadLettered(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	if f := testutil.ToFloat64(h.s.Metrics.Webhooks.WithLabelValues("failed")); f != 1 {
		t.Errorf("failed counted %v times", f)
	}

	// The record as stored (pkg/fleet checks the Redis hash's fields the same way).
	stored, err := h.store.Jobs.GetJob(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	record, _ := json.Marshal(stored)
	texts := map[string]string{"logs": h.logs.String(), "job record": string(record)}
	for i, e := range errs {
		texts["error "+string(rune('1'+i))] = e
		if strings.Contains(e, "q-secret") {
			t.Errorf("error %q contains the URL's query", e)
		}
	}
	noSecret(t, secret, texts)
	if !strings.Contains(h.logs.String(), "webhook failed") {
		t.Errorf("the failure was not logged: %s", h.logs.String())
	}
	if !strings.Contains(errs[len(errs)-1], "127.0.0.1") || !strings.Contains(errs[len(errs)-1], "500") {
		t.Errorf("final error %q does not name the host and status", errs[len(errs)-1])
	}
}

// 410 Gone stops deliveries at once: the webhook is disabled, nothing is retried.
func TestHandleGone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	h.reply = func(int) int { return http.StatusGone }
	job, _ := h.finishedJob(t, "default", nil)
	h.s.JobFinished(t.Context(), job)
	d := enqueued(t, h.s)[0]
	if err := h.s.Handle(t.Context(), attempt(d, 1)); err != nil {
		t.Fatalf("Handle: %v, want done", err)
	}
	if st := webhookStatus(t, h.s, job.ID); st != StatusDisabled {
		t.Errorf("webhook status %q, want disabled", st)
	}
	if err := h.s.Handle(t.Context(), attempt(d, 2)); err != nil || len(h.received()) != 1 {
		t.Errorf("a redelivery after 410: %v, %d requests", err, len(h.received()))
	}
	if n := testutil.ToFloat64(h.s.Metrics.Webhooks.WithLabelValues("gone")); n != 1 {
		t.Errorf("gone counted %v times", n)
	}
	// A dead letter for it (it cannot happen, but) does not turn disabled into failed.
	h.s.DeadLettered(t.Context(), d)
	if st := webhookStatus(t, h.s, job.ID); st != StatusDisabled {
		t.Errorf("webhook status %q after a dead letter", st)
	}
}

// A redirect and a receiver that resolves to a refused address are failed attempts:
// retried, never followed or connected to.
func TestHandleRedirectAndRefusedAddressRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Resolver: mapResolver{"receiver.example": {"10.0.0.5"}}})
	h.reply = func(int) int { return http.StatusFound }
	job, _ := h.finishedJob(t, "default", nil)
	h.s.JobFinished(t.Context(), job)
	d := enqueued(t, h.s)[0]
	err := h.s.Handle(t.Context(), attempt(d, 1))
	if dec := bus.Decide(err, 1, 12); dec.Action != bus.Nak || !strings.Contains(err.Error(), "302") {
		t.Errorf("302: %v (%v)", dec.Action, err)
	}
	d.URL = "http://receiver.example/hook"
	err = h.s.Handle(t.Context(), attempt(d, 2))
	if dec := bus.Decide(err, 2, 12); dec.Action != bus.Nak || !errors.Is(err, ErrRefused) {
		t.Errorf("refused address: %v (%v)", dec.Action, err)
	}
	if len(h.received()) != 1 {
		t.Errorf("%d requests, want only the one answered with 302", len(h.received()))
	}
}

// A tenant's secret signs its jobs' deliveries, and no per-job secret is made or
// stored; DeadLettered marks a job whose delivery died as failed.
func TestTenantSecret(t *testing.T) {
	t.Parallel()
	tenantSecret := NewSecret()
	h := newHarness(t, Config{TenantSecrets: map[string]string{"acme": tenantSecret}})
	job, secret := h.finishedJob(t, "acme", nil)
	if secret != "" {
		t.Fatalf("a per-job secret was made for a tenant with its own")
	}
	if _, err := h.s.Store.WebhookSecret(t.Context(), job.ID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("a per-job secret was stored")
	}
	h.s.JobFinished(t.Context(), job)
	d := enqueued(t, h.s)[0]
	if err := h.s.Handle(t.Context(), attempt(d, 1)); err != nil {
		t.Fatal(err)
	}
	verifyAll(t, h.received(), tenantSecret)

	other, _ := h.finishedJob(t, "acme", nil)
	h.s.JobFinished(t.Context(), other)
	if err := h.s.DeadLettered(t.Context(), enqueued(t, h.s)[1]); err != nil {
		t.Fatal(err)
	}
	if st := webhookStatus(t, h.s, other.ID); st != StatusFailed {
		t.Errorf("dead-lettered delivery: webhook status %q", st)
	}
}

// A delivery with no secret to sign with (the job's expired, the tenant has none) is
// dead-lettered at once.
func TestHandleWithoutSecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	job, _ := h.finishedJob(t, "default", nil)
	h.redis.Del(h.store.K.WebhookSecret(job.ID)) // as its expiry does
	h.s.JobFinished(t.Context(), job)
	err := h.s.Handle(t.Context(), attempt(enqueued(t, h.s)[0], 1))
	if dec := bus.Decide(err, 1, 12); dec.Action != bus.TermDLQ {
		t.Errorf("%v (%v), want term+dlq", dec.Action, err)
	}
	if len(h.received()) != 0 {
		t.Error("an unsigned delivery was sent")
	}
}

// A status the callback did not ask for sends nothing and clears the pending status.
func TestJobFinishedUnwantedEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	job, _ := h.finishedJob(t, "default", map[string]any{"url": "http://127.0.0.1:1/hook", "events": []string{"failed"}})
	h.s.JobFinished(t.Context(), job)
	if n := len(enqueued(t, h.s)); n != 0 {
		t.Errorf("%d deliveries for an event not asked for", n)
	}
	if st := webhookStatus(t, h.s, job.ID); st != "" {
		t.Errorf("webhook status %q, want none", st)
	}
}

// ParseCallback fills in the default events, refuses unknown events and fields and
// refused addresses, and gives out a secret only when the tenant has none.
func TestParseCallback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Resolver: testResolver})
	ctx := context.Background()
	stored, secret, err := h.s.ParseCallback(ctx, "default", "job_a", json.RawMessage(`{"url":"https://public.example/hook"}`))
	if err != nil || secret == "" {
		t.Fatalf("%v %q", err, secret)
	}
	cb, _ := DecodeCallback(stored)
	if strings.Join(cb.Events, ",") != "completed,failed,cancelled" || cb.URL != "https://public.example/hook" {
		t.Errorf("stored %s", stored)
	}
	if strings.Contains(string(stored), strings.TrimPrefix(secret, SecretPrefix)) {
		t.Error("the stored callback contains the secret")
	}
	stored, _, err = h.s.ParseCallback(ctx, "default", "job_b", json.RawMessage(`{"url":"https://public.example/","events":["failed","failed"]}`))
	if cb, _ := DecodeCallback(stored); err != nil || strings.Join(cb.Events, ",") != "failed" {
		t.Errorf("events deduplicated: %s %v", stored, err)
	}
	for _, raw := range []string{
		`{"url":"https://public.example/","events":["completed","finished"]}`,
		`{"url":"https://public.example/","event":["completed"]}`,
		`{"events":["completed"]}`,
		`{"url":"http://169.254.169.254/"}`,
		`{"url":"http://internal.example/"}`,
		`"https://public.example/"`,
		`{"url":"https://public.example/"} {}`,
		`{"url":"https://alice:hunter2@public.example/hook"}`, // stored in the job record: never credentials
	} {
		if _, _, err := h.s.ParseCallback(ctx, "default", "job_c", json.RawMessage(raw)); !errors.Is(err, ErrInvalidCallback) {
			t.Errorf("%s: %v, want ErrInvalidCallback", raw, err)
		}
	}
}

// Enqueue refuses deliveries that could not be delivered or signed.
func TestEnqueueValidates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ok := bus.WebhookDelivery{ID: MessageID("batch_1", "completed"), BatchID: "batch_1", Event: "batch.completed",
		URL: "https://public.example/", Payload: json.RawMessage(`{"type":"batch.completed"}`)}
	if err := h.s.Enqueue(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*bus.WebhookDelivery){
		"no id":       func(d *bus.WebhookDelivery) { d.ID = "" },
		"no owner":    func(d *bus.WebhookDelivery) { d.BatchID = "" },
		"two owners":  func(d *bus.WebhookDelivery) { d.JobID = "job_1" },
		"bad payload": func(d *bus.WebhookDelivery) { d.Payload = json.RawMessage("{") },
		"bad url":     func(d *bus.WebhookDelivery) { d.URL = "ftp://public.example/" },
	} {
		d := ok
		mod(&d)
		if err := h.s.Enqueue(t.Context(), d); err == nil {
			t.Errorf("%s: enqueued", name)
		}
	}
}
