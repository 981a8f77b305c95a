// Package batch runs batch research runs: OpenAI Batch API files and batches, and a
// plain list of queries, each line a job on the fleet's batch consumer.
// (Being built: see the issue "Async jobs with signed webhooks, batch research runs".)
package batch

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// Service serves files and batches and runs batches.
type Service struct {
	Bus      *bus.Bus
	Store    *state.Store
	Webhooks *webhook.Service
	// Models are the model names batch lines may use.
	Models  []string
	Log     *slog.Logger
	Metrics *metrics.Metrics
}

// Routes registers the files and batches endpoints; wrap authenticates them.
func (s *Service) Routes(mux *http.ServeMux, wrap func(http.HandlerFunc) http.HandlerFunc) {}

// JobFinished counts a finished batch job and finalizes its batch after the last.
func (s *Service) JobFinished(ctx context.Context, job *state.Job) {}

// HandleExpand turns a batch into jobs: the batch-expander consumer's handler.
func (s *Service) HandleExpand(ctx context.Context, d *bus.Delivery[bus.BatchExpand]) error {
	return nil
}
