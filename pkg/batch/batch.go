// Package batch runs batch research runs: OpenAI Batch API files and batches, and a
// plain list of queries, each line a job on the fleet's batch consumer. It is the
// batches' logic — validation, expansion, counting, finalization — behind a small
// API; pkg/ingress serves it over HTTP, and pkg/state keeps its records.
//
// A batch's life:
//
//  1. Create (POST /v1/batches) validates every line up front (a refusal lists the
//     line numbers; nothing is created), records the batch (status "validating")
//     with its custom_ids, and publishes one bus.BatchExpand.
//  2. The batch-expander consumer (HandleExpand, in ingress processes) creates the
//     line's jobs — job id = batch id + "_" + line index, so a redelivered or crashed
//     expansion creates each job once — and publishes them on the batch's own lane,
//     fleet.jobs.v1.chat.batch.<tenant>.<batch>, a chunk at a time behind a cursor
//     stored with the batch ("in_progress"); chat workers take lines round robin
//     across tenants and batches.
//  3. Every job that ends calls JobFinished, which counts its line once
//     (state.Store.CountBatchLine). The line that resolves the batch ("finalizing")
//     kicks the expander, which writes the output and error files to the
//     bus.BucketFiles object store and ends the batch ("completed", or "expired" if
//     its completion window ended first), then enqueues its webhook.
//  4. Cancel moves the batch to "cancelling"; the expander cancels the unfinished jobs
//     and ends it "cancelled" with the partial output.
//
// Every step after creation runs in HandleExpand, under a per-batch lease, and is
// idempotent, so any ingress can take over a batch from one that died.
package batch

import (
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// Service keeps files and runs batches.
type Service struct {
	Bus   *bus.Bus
	Store Store
	// Webhooks validates batch callbacks (nil: callbacks refused).
	Webhooks *webhook.Service
	// Ender ends the jobs a cancel or an expiry sweeps.
	Ender *jobs.Ender
	// Models are the model names batch lines may use.
	Models []string
	// Research runs the lines of batches whose endpoint is "/v1/research" (nil:
	// such batches are refused).
	Research *research.Service
	Log      *slog.Logger
	Metrics  *metrics.Metrics
	// MaxFileBytes bounds an uploaded file (default DefaultMaxFileBytes, 200 MB).
	// Uploads do not go through ingress's body limit: they are streamed to disk.
	MaxFileBytes int64
	// Limits are each tenant's limits on batches and stored files (nil: none).
	Limits *config.TenantLimits
	// FilesMaxBytes bounds the bus.BucketFiles object store as a whole (0: no bound);
	// a full store refuses new files (Full). FileExpiry is how long an upload without
	// expires_after is kept (default DefaultFileExpiry).
	FilesMaxBytes int64
	FileExpiry    time.Duration

	mu  sync.Mutex
	obs jetstream.ObjectStore
}
