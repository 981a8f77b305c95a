// Package batch runs batch research runs: OpenAI Batch API files and batches, and a
// plain list of queries, each line a job on the fleet's batch consumer.
//
// A batch's life:
//
//  1. POST /v1/batches validates every line up front (400 with line numbers, nothing
//     created), records the batch in Redis (status "validating") with its custom_ids,
//     and publishes one bus.BatchExpand.
//  2. The batch-expander consumer (HandleExpand, in ingress processes) creates the
//     line's jobs — job id = batch id + "_" + line index, so a redelivered or crashed
//     expansion creates each job once — and publishes them on fleet.jobs.v1.batch, a
//     chunk at a time behind a cursor stored with the batch ("in_progress").
//  3. Every job that ends calls JobFinished, which counts its line once (HSETNX on the
//     batch's done hash). The line that resolves the batch ("finalizing") kicks the
//     expander, which writes the output and error files to the bus.BucketFiles object
//     store and ends the batch ("completed", or "expired" if its completion window
//     ended first), then enqueues its webhook.
//  4. Cancel moves the batch to "cancelling"; the expander cancels the unfinished jobs
//     and ends it "cancelled" with the partial output.
//
// Every step after creation runs in HandleExpand, under a per-batch lease, and is
// idempotent, so any ingress can take over a batch from one that died.
package batch

import (
	"log/slog"
	"net/http"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

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
	// MaxFileBytes bounds an uploaded file (default DefaultMaxFileBytes, 200 MB).
	// Uploads do not go through ingress's body limit: they are streamed to disk.
	MaxFileBytes int64

	mu  sync.Mutex
	obs jetstream.ObjectStore
}

// Routes registers the files and batches endpoints; wrap authenticates them.
func (s *Service) Routes(mux *http.ServeMux, wrap func(http.HandlerFunc) http.HandlerFunc) {
	mux.HandleFunc("POST /v1/files", wrap(s.uploadFile))
	mux.HandleFunc("GET /v1/files", wrap(s.listFiles))
	mux.HandleFunc("GET /v1/files/{id}", wrap(s.getFile))
	mux.HandleFunc("GET /v1/files/{id}/content", wrap(s.fileContent))
	mux.HandleFunc("DELETE /v1/files/{id}", wrap(s.deleteFile))
	mux.HandleFunc("POST /v1/batches", wrap(s.createBatch))
	mux.HandleFunc("GET /v1/batches", wrap(s.listBatches))
	mux.HandleFunc("GET /v1/batches/{id}", wrap(s.getBatch))
	mux.HandleFunc("POST /v1/batches/{id}/cancel", wrap(s.cancelBatch))
}
