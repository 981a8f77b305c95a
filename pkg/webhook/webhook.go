// Package webhook delivers job and batch callbacks per the Standard Webhooks spec
// (https://www.standardwebhooks.com): each delivery is a JSON body fixed when it is
// enqueued, signed on every attempt with webhook-id (the same on every attempt),
// webhook-timestamp and webhook-signature (v1, HMAC-SHA256), and retried durably on
// the WEBHOOKS stream on the configured schedule. Callback URLs are kept away from the
// fleet's own network (pkg/netguard): checked when registered, and checked again on every
// connection, which goes to the address that was checked.
//
// A job's webhook status (its record's "webhook" field) moves from "pending" to
// "delivered", "failed" (every attempt failed; the delivery is in the DLQ) or
// "disabled" (the receiver answered 410 Gone). Signing secrets are the tenant's, or
// made for the job and kept beside it, never in it; no secret reaches a log line, an
// error or a job record.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/netguard"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// Config configures deliveries.
type Config struct {
	// Schedule is the wait before each retry; a delivery gets len(Schedule)+1 tries
	// (an empty schedule: one try). Attempt n that fails waits Schedule[n-1].
	Schedule []time.Duration
	// Allow lists address ranges callbacks may reach although they are private,
	// loopback or link-local (tests allow loopback).
	Allow []netip.Prefix
	// Timeout bounds one delivery attempt, connect to last byte (default 10s).
	Timeout time.Duration
	// TenantSecrets are the tenants' whsec_ signing secrets. A tenant without one gets
	// a secret made for each job. During a rotation a tenant's entry holds the new and
	// the old secret, separated by a space (see sign.go).
	TenantSecrets map[string]string
	// SecretOverlapUntil ends a tenant's rotation overlap: from then on only the first
	// of its secrets signs.
	SecretOverlapUntil map[string]time.Time
	// Resolver resolves callback hosts, at registration and at every connection; nil
	// means the system resolver. Tests map names to chosen addresses with it.
	Resolver netguard.Resolver
	// Pool is how many deliveries one consumer makes at once (default 64); the
	// WEBHOOKS consumer's concurrency.
	Pool int
	// TenantInFlight caps one tenant's deliveries in progress (default 8), and
	// HostInFlight one destination host's (default 16; halved by each failed attempt,
	// down to 1, and raised by one by each answered one). Deliveries past a cap are
	// deferred: redelivered after about Defer (default 1s), see fair.go.
	TenantInFlight, HostInFlight int
	Defer                        time.Duration
}

// PoolSize is the number of deliveries made at once: Config.Pool or its default.
func (c Config) PoolSize() int {
	if c.Pool > 0 {
		return c.Pool
	}
	return DefaultPool
}

// Validate checks the tenants' secrets (naming the tenant, never the secret).
func (c Config) Validate() error {
	var errs []error
	for tenant, sec := range c.TenantSecrets {
		if err := CheckSecret(sec); err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: %w", tenant, err))
		}
	}
	return errors.Join(errs...)
}

// defaultTimeout bounds an attempt when Config.Timeout is unset: long enough for a
// slow receiver, short against the consumer's ack wait.
const defaultTimeout = 10 * time.Second

// The webhook statuses of a job record.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
	StatusDisabled  = "disabled"
)

// Service validates callbacks and delivers them. Its Config is read on first use
// (the guard and HTTP client are built from it then) and must not change afterwards;
// a Service must not be copied.
type Service struct {
	Bus     *bus.Bus
	Store   Store
	Config  Config
	Log     *slog.Logger
	Metrics *metrics.Metrics

	once   sync.Once
	guard  *netguard.Guard
	client *http.Client
	fair   *fairness
}

// errNoSecret means a delivery has no secret to be signed with: its job's secret
// expired with the job, and its tenant has none.
var errNoSecret = errors.New("no signing secret: neither the tenant's nor one made for the job or batch")

func (s *Service) init() {
	s.once.Do(func() {
		s.guard = &netguard.Guard{Allow: s.Config.Allow, Resolver: s.Config.Resolver}
		s.client = netguard.NewClient(s.guard)
		s.fair = newFairness(s.Config.TenantInFlight, s.Config.HostInFlight)
	})
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func (s *Service) count(outcome string) {
	if s.Metrics != nil {
		s.Metrics.Webhooks.WithLabelValues(outcome).Inc()
	}
}

// CheckURL refuses a callback URL that is not http(s), has no host, or resolves to an
// address that is not public and not allow-listed (see netguard.Guard).
func (s *Service) CheckURL(ctx context.Context, raw string) error {
	s.init()
	_, err := s.guard.CheckURL(ctx, raw)
	return err
}

// ParseCallback validates a callback and makes its signing secret: ValidateCallback,
// then Secret.
func (s *Service) ParseCallback(ctx context.Context, tenant, id string, raw json.RawMessage) (stored json.RawMessage, secret string, err error) {
	if stored, err = s.ValidateCallback(ctx, raw); err != nil {
		return nil, "", err
	}
	if secret, err = s.Secret(ctx, tenant, id); err != nil {
		return nil, "", err
	}
	return stored, secret, nil
}

// ValidateCallback checks a callback ({"url", "events"}: the URL must not reach a
// private address) and returns what to store with the job or batch. Its errors are
// ErrInvalidCallback: the client's to fix. Nothing is stored, so a refused callback
// leaves nothing behind (no Idempotency-Key is claimed before it passes).
func (s *Service) ValidateCallback(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	cb, err := parseCallback(raw)
	if err != nil {
		return nil, invalid{err}
	}
	if err := s.CheckURL(ctx, cb.URL); err != nil {
		return nil, invalid{fmt.Errorf("callback.url: %w", err)}
	}
	return json.Marshal(cb)
}

// Secret returns the signing secret a job's (or batch's) webhooks are signed with, to
// show its client: "" when the tenant has a secret of its own, else the one made for
// this id — made on the first call, the same on every later one, so a client whose
// first response was lost gets it again with the replay.
func (s *Service) Secret(ctx context.Context, tenant, id string) (string, error) {
	if id == "" {
		return "", errors.New("callback: no job id")
	}
	if sec := s.Config.TenantSecrets[tenant]; sec != "" {
		if CheckSecret(sec) != nil {
			return "", errors.New("callbacks are unavailable: this tenant's signing secret is misconfigured")
		}
		return "", nil
	}
	sec, err := s.Store.KeepWebhookSecret(ctx, id, NewSecret())
	if err != nil {
		return "", fmt.Errorf("storing the callback's signing secret: %w", err)
	}
	return sec, nil
}

// ErrInvalidCallback matches (errors.Is) the errors of ParseCallback that are the
// client's to fix — a malformed callback, an unknown event, a refused URL — as
// opposed to the server's (storing the secret failed, a misconfigured tenant).
var ErrInvalidCallback = errors.New("invalid callback")

// invalid marks a client's error as ErrInvalidCallback without changing its message.
type invalid struct{ err error }

func (e invalid) Error() string        { return e.err.Error() }
func (e invalid) Unwrap() error        { return e.err }
func (e invalid) Is(target error) bool { return target == ErrInvalidCallback }

// MessageID is the webhook-id of the delivery of event for a job or batch: derived
// from what it is about, so a replayed finish enqueues one delivery.
func MessageID(id, event string) string { return "msg_" + id + "_" + event }

// JobFinished enqueues the delivery a finished job's callback asks for: one
// "job.<status>" event carrying the job as GET /v1/jobs/{id} shows it. A job whose
// webhook was already settled is left alone; a status the callback did not ask for
// clears the job's webhook status. Errors are logged: the job itself has ended.
func (s *Service) JobFinished(ctx context.Context, job *state.Job) error {
	if job == nil || len(job.Callback) == 0 || !job.Status.Terminal() {
		return nil
	}
	switch job.WebhookStatus {
	case StatusDelivered, StatusFailed, StatusDisabled:
		return nil
	}
	log := s.log().With("job", job.ID)
	cb, err := DecodeCallback(job.Callback)
	if err != nil {
		log.Error("webhook: job callback unreadable", "err", err)
		return nil // no retry can fix it
	}
	event := string(job.Status)
	if !cb.Wants(event) {
		if _, _, err := s.Store.SetWebhookStatus(ctx, job.ID, "", StatusPending); err != nil {
			return fmt.Errorf("webhook: clearing status: %w", err)
		}
		return nil
	}
	at := job.Finished
	if at.IsZero() {
		at = time.Now()
	}
	d, err := NewDelivery(bus.WebhookDelivery{Tenant: job.Tenant, JobID: job.ID, URL: cb.URL}, "job", event, at, viewOf(job))
	if err != nil {
		log.Error("webhook: building delivery", "err", err)
		return nil
	}
	// Pending before the publish: a fast delivery must not be overwritten by it.
	if _, _, err := s.Store.SetWebhookStatus(ctx, job.ID, StatusPending, "", StatusPending); err != nil {
		return fmt.Errorf("webhook: marking pending: %w", err)
	}
	if err := s.Enqueue(ctx, d); err != nil {
		return fmt.Errorf("webhook: enqueueing %s: %w", d.ID, err)
	}
	return nil
}

// NewDelivery completes the delivery of event (a status: "completed", …) about a job,
// batch or research run of kind ("job", "batch", "research"); d says whose it is
// (Tenant, and JobID or BatchID) and where it goes (URL). Its type is kind.event
// ("batch.completed"), its body data as of at (NewPayload), its id MessageID of the
// owner and event, so a replayed end enqueues one delivery. Deciding whether to send
// it, and recording that it was queued, is the caller's: a job marks its webhook
// pending before the enqueue, a batch and a run record it after.
func NewDelivery(d bus.WebhookDelivery, kind, event string, at time.Time, data any) (bus.WebhookDelivery, error) {
	d.Event = kind + "." + event
	body, err := NewPayload(d.Event, at, data)
	if err != nil {
		return bus.WebhookDelivery{}, err
	}
	d.ID, d.Payload, d.Created = MessageID(ownerOf(d), event), body, at.UTC()
	return d, nil
}

// Enqueue queues one delivery on the WEBHOOKS stream. d.ID is its webhook-id and
// message id (use MessageID), so enqueueing it twice delivers it once; d.Payload is
// the body every attempt sends (use NewPayload); exactly one of d.JobID and d.BatchID
// says whose signing secret signs it: the one ParseCallback made for that id, else
// the tenant's.
func (s *Service) Enqueue(ctx context.Context, d bus.WebhookDelivery) error {
	switch {
	case d.ID == "" || d.Event == "":
		return errors.New("webhook: a delivery needs an id and an event")
	case (d.JobID == "") == (d.BatchID == ""):
		return fmt.Errorf("webhook %s: a delivery is about one job or one batch", d.ID)
	case !json.Valid(d.Payload):
		return fmt.Errorf("webhook %s: the payload is not JSON", d.ID)
	}
	if _, err := netguard.CheckShape(d.URL); err != nil {
		return fmt.Errorf("webhook %s: %w", d.ID, err)
	}
	if d.Created.IsZero() {
		d.Created = time.Now().UTC()
	}
	if err := s.Bus.Publish(ctx, bus.SubjectWebhook, d); err != nil {
		return fmt.Errorf("webhook %s: %w", d.ID, err)
	}
	return nil
}

// Handle delivers one webhook: the WEBHOOKS consumer's handler. A 2xx answer is
// delivered; 410 Gone disables the callback (no more tries); anything else — another
// status (3xx included: redirects are not followed), a timeout, a refused connection,
// an address the guard refuses — is retried after Config.Schedule[attempt-1], and
// after the last try the job is marked webhook_failed and the delivery dead-lettered.
// A delivery past its tenant's in-flight cap or its destination's limit is not
// attempted: it is deferred (see fair.go), and that is not one of its tries.
func (s *Service) Handle(ctx context.Context, d *bus.Delivery[bus.WebhookDelivery]) error {
	s.init()
	m := d.Msg
	if m.JobID != "" {
		st, err := s.Store.JobWebhookStatus(ctx, m.JobID)
		if err != nil {
			return fmt.Errorf("webhook %s: reading job: %w", m.ID, err)
		}
		if st == StatusDelivered || st == StatusDisabled {
			return nil // settled by an earlier delivery whose ack was lost
		}
	}
	if tries := len(s.Config.Schedule) + 1; d.Attempt > tries {
		// Past the tries by delivery count: unless hold-backs account for it, its
		// attempts ended without an outcome (the worker died in each).
		n, err := s.attempt(ctx, d)
		if err != nil {
			return err
		}
		if n > tries {
			return s.giveUp(ctx, m, fmt.Errorf("webhook %s: dead-lettered: %d attempts, none finished", m.ID, n-1))
		}
	}
	secret, err := s.secretFor(ctx, m)
	if errors.Is(err, errNoSecret) {
		return s.giveUp(ctx, m, fmt.Errorf("webhook %s: %w", m.ID, err))
	}
	if err != nil {
		return err
	}
	done, reason := s.fair.acquire(m.Tenant, destOf(m.URL))
	if done == nil {
		return s.hold(ctx, m, reason)
	}
	code, err := s.post(ctx, m, secret)
	// An answer other than 5xx or 429 is the receiver's word, promptly given: the host
	// is well; anything else slows deliveries to it down.
	done(err == nil && code < 500 && code != http.StatusTooManyRequests)
	switch {
	case err == nil && code >= 200 && code < 300:
		s.count("delivered")
		return s.settle(ctx, m, StatusDelivered, "")
	case err == nil && code == http.StatusGone:
		s.count("gone")
		return s.settle(ctx, m, StatusDisabled, fmt.Sprintf("host %s answered 410 Gone: no more deliveries", hostOf(m.URL)))
	case err == nil && code >= 300 && code < 400:
		err = fmt.Errorf("host %s answered %d (redirects are not followed)", hostOf(m.URL), code)
	case err == nil:
		err = fmt.Errorf("host %s answered %d", hostOf(m.URL), code)
	}
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: not the receiver's failure
	}
	return s.failed(ctx, d, err)
}

// failed decides what a failed attempt leads to: a retry on the schedule, or, after
// the last try, a failed webhook and a dead letter.
func (s *Service) failed(ctx context.Context, d *bus.Delivery[bus.WebhookDelivery], err error) error {
	m, tries := d.Msg, len(s.Config.Schedule)+1
	n, aerr := s.attempt(ctx, d)
	if aerr != nil {
		return aerr // tried again, as a new attempt
	}
	if n < tries && !d.Last() {
		s.count("retry")
		return bus.Retry(s.Config.Schedule[n-1], fmt.Errorf("webhook %s: attempt %d of %d: %w", m.ID, n, tries, err))
	}
	return s.giveUp(ctx, m, fmt.Errorf("webhook %s: giving up after %d attempts: %w", m.ID, n, err))
}

// giveUp ends a delivery that will not be tried again: its webhook fails with err,
// and it is dead-lettered.
func (s *Service) giveUp(ctx context.Context, m bus.WebhookDelivery, err error) error {
	s.count("failed")
	if serr := s.settle(ctx, m, StatusFailed, err.Error()); serr != nil {
		// The dead letter reaches DeadLettered, which marks the job again.
		s.log().Warn("webhook: marking failed", "webhook_id", m.ID, "err", serr)
	}
	return bus.Permanent(err)
}

// attempt is a delivery's attempt number: its delivery count less the times it was
// held back by a fairness cap.
func (s *Service) attempt(ctx context.Context, d *bus.Delivery[bus.WebhookDelivery]) (int, error) {
	n := max(d.Attempt, 1)
	if n == 1 {
		return 1, nil
	}
	held, err := s.Store.WebhookDeferrals(ctx, ownerOf(d.Msg), d.Msg.ID)
	if err != nil {
		return 0, fmt.Errorf("webhook %s: %w", d.Msg.ID, err)
	}
	return max(n-held, 1), nil
}

// hold defers a delivery a fairness cap holds back: it is counted (in Redis, so its
// attempt number stays right, and in the metrics) and redelivered after a short wait.
func (s *Service) hold(ctx context.Context, m bus.WebhookDelivery, reason string) error {
	held, err := s.Store.CountWebhookDeferral(ctx, ownerOf(m), m.ID)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", m.ID, err)
	}
	if s.Metrics != nil {
		s.Metrics.WebhookDeferred.WithLabelValues(m.Tenant, reason).Inc()
	}
	return bus.Defer(deferFor(s.Config.Defer, held), fmt.Errorf("webhook %s: held back: %s in-flight cap reached", m.ID, reason))
}

// ownerOf is the job or batch a delivery is about.
func ownerOf(m bus.WebhookDelivery) string {
	if m.JobID != "" {
		return m.JobID
	}
	return m.BatchID
}

// HandleDeadLetter is DeadLettered for a dead letter of the DLQ.
func (s *Service) HandleDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	d, _, err := bus.Decode[bus.WebhookDelivery](dl.Data)
	if err != nil {
		return nil // undecodable: it stays in the DLQ for operators
	}
	return s.DeadLettered(ctx, d)
}

// DeadLettered marks what a dead delivery was about as webhook_failed: a delivery
// whose worker died on every attempt, or one Handle gave up on (then it is marked
// already, and nothing changes).
func (s *Service) DeadLettered(ctx context.Context, d bus.WebhookDelivery) error {
	return s.settle(ctx, d, StatusFailed, fmt.Sprintf("webhook %s: dead-lettered: no attempt finished", d.ID))
}

// secretFor returns the secret that signs a delivery: the one made for its job or
// batch, else its tenant's.
func (s *Service) secretFor(ctx context.Context, m bus.WebhookDelivery) (string, error) {
	sec, err := s.Store.WebhookSecret(ctx, ownerOf(m))
	switch {
	case err == nil:
		return sec, nil
	case !errors.Is(err, state.ErrNotFound):
		return "", fmt.Errorf("webhook %s: reading its signing secret: %w", m.ID, err)
	}
	if sec := s.Config.tenantSecret(m.Tenant, time.Now()); sec != "" {
		return sec, nil
	}
	return "", errNoSecret
}

// post makes one attempt and returns the receiver's status code. Errors name the
// URL's host only: not its credentials, path or query, and never the secret.
func (s *Service) post(ctx context.Context, m bus.WebhookDelivery, secret string) (code int, err error) {
	ctx, span := trace.Start(ctx, "webhook POST", oteltrace.SpanKindClient)
	defer func() { trace.Attempted(span, m.JobID, hostOf(m.URL), code, err) }()
	timeout := s.Config.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := hostOf(m.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Payload))
	if err != nil {
		return 0, fmt.Errorf("%w: the callback url for host %s does not make a request", netguard.ErrRefused, host)
	}
	if err := SetHeaders(req.Header, secret, m.ID, time.Now(), m.Payload); err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "searchfleet-webhooks/1")
	resp, err := s.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // its message repeats the whole URL
		}
		return 0, fmt.Errorf("POST to host %s: %w", host, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return resp.StatusCode, nil
}

// settle records a delivery's outcome: the job's webhook status and event, or the
// batch's webhook status. "failed" and "disabled" only replace "pending" (or
// nothing): a delivered webhook stays delivered.
func (s *Service) settle(ctx context.Context, m bus.WebhookDelivery, status, reason string) error {
	from := []string{"", StatusPending}
	if status == StatusDelivered {
		from = append(from, StatusFailed)
	}
	if m.JobID == "" {
		if m.BatchID == "" {
			return nil
		}
		if err := s.Store.SetBatchWebhook(ctx, m.BatchID, status, from...); err != nil {
			return fmt.Errorf("webhook %s: recording %s: %w", m.ID, status, err)
		}
		return nil
	}
	now, changed, err := s.Store.SetWebhookStatus(ctx, m.JobID, status, from...)
	if err != nil {
		return fmt.Errorf("webhook %s: recording %s: %w", m.ID, status, err)
	}
	if changed && status == StatusFailed {
		s.log().Warn("webhook failed", "webhook_id", m.ID, "job", m.JobID, "reason", reason)
	}
	ev := bus.Event{JobID: m.JobID, At: time.Now().UTC(), Error: reason}
	switch now {
	case StatusDelivered:
		ev.Type = bus.EventWebhookSent
	case StatusFailed, StatusDisabled:
		ev.Type = bus.EventWebhookFailed
	default:
		return nil
	}
	// The event's id is derived from the job and type: a repeat is one event.
	if err := s.Bus.Publish(ctx, ev.Subject(), ev); err != nil {
		s.log().Warn("webhook: publishing event", "job", m.JobID, "event", ev.Type, "err", err)
	}
	return nil
}
