// Package webhook delivers job and batch callbacks per the Standard Webhooks spec.
// (Being built: see the issue "Async jobs with signed webhooks".)
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Config configures deliveries.
type Config struct {
	// Schedule is the wait before each retry; a delivery gets len(Schedule)+1 tries.
	Schedule []time.Duration
	// Allow lists address ranges callbacks may reach although they are private,
	// loopback or link-local (tests allow loopback).
	Allow []netip.Prefix
	// Timeout bounds one delivery attempt.
	Timeout time.Duration
	// TenantSecrets are the tenants' whsec_ signing secrets.
	TenantSecrets map[string]string
}

// Service validates callbacks and delivers them.
type Service struct {
	Bus     *bus.Bus
	Store   *state.Store
	Config  Config
	Log     *slog.Logger
	Metrics *metrics.Metrics
}

// ErrNotBuilt is returned until webhooks are built.
var ErrNotBuilt = errors.New("webhooks are not available yet")

// ParseCallback validates a job's callback and returns what to store with the job,
// and, when the tenant has no signing secret, a secret made for this job (given to
// the client once).
func (s *Service) ParseCallback(ctx context.Context, tenant, jobID string, raw json.RawMessage) (stored json.RawMessage, secret string, err error) {
	return nil, "", ErrNotBuilt
}

// JobFinished enqueues the deliveries a finished job's callback asks for.
func (s *Service) JobFinished(ctx context.Context, job *state.Job) {}

// Handle delivers one webhook: the WEBHOOKS consumer's handler.
func (s *Service) Handle(ctx context.Context, d *bus.Delivery[bus.WebhookDelivery]) error {
	return nil
}

// DeadLettered marks what a dead delivery was about as webhook_failed.
func (s *Service) DeadLettered(ctx context.Context, d bus.WebhookDelivery) error { return nil }
