package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/httpx"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Batch creation limits.
const (
	// defaultWindow is the completion window when the client names none: OpenAI's
	// only one. Other Go durations from minWindow to maxWindow are accepted too.
	defaultWindow = "24h"
	minWindow     = time.Second
	maxWindow     = 7 * 24 * time.Hour
	// maxQueriesBytes bounds the body of the simple {queries} form: 50,000 questions
	// of several hundred characters fit.
	maxQueriesBytes = 64 << 20
	// maxQueryBytes bounds one question of the simple form.
	maxQueryBytes = 32 << 10
)

// createParams are the fields both forms of POST /v1/batches share. Callback is an
// extension of the OpenAI shape: {url, events?} as for POST /v1/jobs.
type createParams struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
	Callback         json.RawMessage   `json:"callback"`
	// Queries and Model make the simple form: each query is a chat request with that
	// one user message, custom_id "q-<n>" (n from 1).
	Queries []string `json:"queries"`
	Model   string   `json:"model"`
}

// createBatch is POST /v1/batches: the OpenAI shape ({input_file_id, endpoint,
// completion_window, metadata}) or the simple form ({queries, model, metadata,
// callback}). Every line is validated before anything is created; the batch is then
// recorded and queued for expansion, and answered as status "validating".
func (s *Service) createBatch(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxQueriesBytes))
	if err != nil {
		httpx.WriteError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", "",
			fmt.Sprintf("The request body exceeds %d bytes; upload large inputs with POST /v1/files.", maxQueriesBytes))
		return
	}
	var p createParams
	if err := json.Unmarshal(body, &p); err != nil {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "", "The body must be a JSON object: "+err.Error())
		return
	}
	b, msg, param := s.newRecord(r, &p)
	if msg != "" {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", param, msg)
		return
	}
	secret, ok := s.takeCallback(w, r, b, p.Callback)
	if !ok {
		return
	}
	var ids []string
	if p.Queries != nil {
		ids, ok = s.inputFromQueries(w, r, b, &p)
	} else {
		ids, ok = s.inputFromFile(w, r, b, &p)
	}
	if ok {
		s.startBatch(w, r, b, secret, ids)
	}
}

// takeCallback validates the batch's callback, if it has one, through the webhook
// service, which also makes the batch a signing secret when the tenant has none. It
// has answered when !ok.
func (s *Service) takeCallback(w http.ResponseWriter, r *http.Request, b *record, callback json.RawMessage) (secret string, ok bool) {
	if len(callback) == 0 || string(callback) == "null" {
		return "", true
	}
	if s.Webhooks == nil {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "callback", "callbacks are not enabled on this server")
		return "", false
	}
	stored, secret, err := s.Webhooks.ParseCallback(r.Context(), b.Tenant, b.ID, callback)
	if err != nil {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "invalid_callback", "callback", err.Error())
		return "", false
	}
	b.Callback = stored
	return secret, true
}

// newRecord checks the fields both forms share and builds the batch record; a
// message explains what is wrong.
func (s *Service) newRecord(r *http.Request, p *createParams) (b *record, msg, param string) {
	if p.Endpoint != "" && p.Endpoint != chatEndpoint {
		return nil, fmt.Sprintf("endpoint %q is not supported; batches run %q", p.Endpoint, chatEndpoint), "endpoint"
	}
	if p.CompletionWindow == "" {
		p.CompletionWindow = defaultWindow
	}
	window, err := time.ParseDuration(p.CompletionWindow)
	if err != nil || window < minWindow || window > maxWindow {
		return nil, fmt.Sprintf("completion_window %q must be a duration such as \"24h\" (from %s to %s)", p.CompletionWindow, minWindow, maxWindow), "completion_window"
	}
	if msg := checkMetadata(p.Metadata); msg != "" {
		return nil, msg, "metadata"
	}
	now := time.Now().UTC()
	return &record{ID: state.NewID("batch_"), Tenant: httpx.Tenant(r), Status: statusValidating, Endpoint: chatEndpoint,
		Window: p.CompletionWindow, Metadata: p.Metadata, Created: now, Expires: now.Add(window)}, "", ""
}

// checkMetadata applies OpenAI's metadata rules: at most 16 pairs, keys up to 64
// characters, values up to 512.
func checkMetadata(m map[string]string) string {
	if len(m) > 16 {
		return fmt.Sprintf("metadata has %d keys; at most 16 are allowed", len(m))
	}
	for k, v := range m {
		if len(k) > 64 {
			return fmt.Sprintf("metadata key %q is longer than 64 characters", k[:16]+"…")
		}
		if len(v) > 512 {
			return fmt.Sprintf("metadata value of %q is longer than 512 characters", k)
		}
	}
	return ""
}

// inputFromFile checks the OpenAI form's input file: the tenant's, uploaded for
// batches, every line valid (validated again: the models served may have changed
// since the upload). It returns the custom_ids; it has answered when !ok.
func (s *Service) inputFromFile(w http.ResponseWriter, r *http.Request, b *record, p *createParams) (ids []string, ok bool) {
	ctx := r.Context()
	if p.InputFileID == "" {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "input_file_id", "input_file_id is required (or send {\"queries\": [...]})")
		return nil, false
	}
	f, err := s.fileByID(ctx, p.InputFileID)
	if errors.Is(err, errNoFile) || err == nil && f.Tenant != b.Tenant {
		httpx.WriteError(w, http.StatusNotFound, "invalid_request_error", "file_not_found", "input_file_id", fmt.Sprintf("No such file: %q.", p.InputFileID))
		return nil, false
	}
	if err == nil && f.Purpose != purposeBatch {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "input_file_id", fmt.Sprintf("File %s has purpose %q; a batch input needs purpose \"batch\".", f.ID, f.Purpose))
		return nil, false
	}
	var v *validation
	if err == nil {
		v, err = s.validateStored(ctx, f.ID)
	}
	if err != nil {
		s.Log.Error("batch: reading an input file", "file", p.InputFileID, "err", err)
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Could not read the input file; try again.")
		return nil, false
	}
	if v.Invalid > 0 {
		httpx.WriteJSON(w, http.StatusBadRequest, v.asInputError("input_file_id"))
		return nil, false
	}
	b.InputFileID, b.Model, b.Total = f.ID, v.Model, v.Requests
	return v.CustomIDs, true
}

// validateStored validates a stored file.
func (s *Service) validateStored(ctx context.Context, id string) (*validation, error) {
	rc, err := s.openFile(ctx, id)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return validate(rc, s.Models)
}

// inputFromQueries turns the simple form into an input file (stored, so the batch
// reads like any other): one chat request per question. It returns the custom_ids;
// it has answered when !ok.
func (s *Service) inputFromQueries(w http.ResponseWriter, r *http.Request, b *record, p *createParams) (ids []string, ok bool) {
	if p.InputFileID != "" {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "queries", "Send either queries or input_file_id, not both.")
		return nil, false
	}
	if p.Model == "" && len(s.Models) == 1 {
		p.Model = s.Models[0]
	}
	if p.Model == "" {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "model", "model is required with queries; available models: "+strings.Join(s.Models, ", "))
		return nil, false
	}
	var buf bytes.Buffer
	va := newValidator(s.Models)
	for i, q := range p.Queries {
		if e := checkQuery(i, q); e != nil {
			va.fail(*e)
			continue
		}
		line, _ := json.Marshal(inputLine{CustomID: "q-" + strconv.Itoa(i+1), Method: "POST", URL: chatEndpoint,
			Body: queryBody(p.Model, q)})
		va.line(i+1, line)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	v := va.result()
	if v.Invalid > 0 {
		httpx.WriteJSON(w, http.StatusBadRequest, v.asInputError("queries"))
		return nil, false
	}
	f := &fileRecord{ID: state.NewID("file-"), Tenant: b.Tenant, Filename: b.ID + "_queries.jsonl", Purpose: purposeBatch, Created: b.Created}
	if err := s.saveFile(r.Context(), f, &buf); err != nil {
		s.Log.Error("batch: storing queries", "err", err)
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Could not store the queries; try again.")
		return nil, false
	}
	b.InputFileID, b.Model, b.Total = f.ID, v.Model, v.Requests
	return v.CustomIDs, true
}

// checkQuery checks question i of the simple form.
func checkQuery(i int, q string) *lineError {
	param := fmt.Sprintf("queries[%d]", i)
	switch {
	case strings.TrimSpace(q) == "":
		return ptr(newLineError(i+1, "empty_query", param, "%s is empty", param))
	case len(q) > maxQueryBytes:
		return ptr(newLineError(i+1, "query_too_long", param, "%s is longer than %d bytes", param, maxQueryBytes))
	}
	return nil
}

// queryBody is the chat request of one question.
func queryBody(model, q string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []any{map[string]string{"role": "user", "content": q}}})
	return b
}

// startBatch records the validated batch, queues its expansion and answers with it
// (and the callback's signing secret, once).
func (s *Service) startBatch(w http.ResponseWriter, r *http.Request, b *record, secret string, ids []string) {
	ctx := r.Context()
	if err := s.insert(ctx, b, ids); err != nil {
		s.Log.Error("batch: recording", "batch", b.ID, "err", err)
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Could not record the batch; try again.")
		return
	}
	if err := s.Bus.Publish(ctx, bus.SubjectExpand, bus.BatchExpand{BatchID: b.ID, Tenant: b.Tenant}); err != nil {
		s.Log.Error("batch: queueing expansion", "batch", b.ID, "err", err)
		s.failBatch(context.WithoutCancel(ctx), b.ID, newLineError(0, "queue_unavailable", "", "the batch could not be queued: %v", err))
		w.Header().Set("Retry-After", "1")
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "The fleet could not take the batch; try again.")
		return
	}
	v := b.view()
	v.WebhookSecret = secret
	httpx.WriteJSON(w, http.StatusOK, v)
}

// insert records a new batch, its custom_ids and its place in the tenant's list and
// in the active set, in one round trip. Its keys live until the completion window
// ends plus the store's retention; a batch that ends keeps them for the retention.
func (s *Service) insert(ctx context.Context, b *record, ids []string) error {
	ttl := time.Until(b.Expires) + s.Store.Retention
	_, err := s.Store.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.Store.K.Batch(b.ID), b.fields()...)
		for start := 0; start < len(ids); start += 1000 {
			end := min(start+1000, len(ids))
			args := make([]any, 0, 2*(end-start))
			for i := start; i < end; i++ {
				args = append(args, strconv.Itoa(i), ids[i])
			}
			p.HSet(ctx, s.Store.K.BatchIDs(b.ID), args...)
		}
		p.PExpire(ctx, s.Store.K.Batch(b.ID), ttl)
		p.PExpire(ctx, s.Store.K.BatchIDs(b.ID), ttl)
		p.ZAdd(ctx, s.Store.K.TenantBatches(b.Tenant), redis.Z{Score: float64(b.Created.UnixMilli()), Member: b.ID})
		p.SAdd(ctx, s.Store.K.ActiveBatches(), b.ID)
		return nil
	})
	return err
}

// failBatch ends a batch that cannot run as failed, with the reason as its error.
func (s *Service) failBatch(ctx context.Context, id string, e lineError) {
	errs, _ := json.Marshal([]lineError{e})
	moved, err := s.finish(ctx, id, statusFailed, "errors", errs)
	if err != nil {
		s.Log.Error("batch: marking failed", "batch", id, "err", err)
	}
	if moved {
		s.Log.Warn("batch failed", "batch", id, "reason", e.Message)
	}
}

// finish gives a batch its final status (and fields) unless it has one, and reports
// whether it did.
func (s *Service) finish(ctx context.Context, id, status string, fields ...any) (bool, error) {
	now := time.Now()
	argv := append([]any{status, status + "_at", state.Millis(now), s.Store.Retention.Milliseconds()}, fields...)
	n, err := finishBatch.Run(ctx, s.Store.R, []string{s.Store.K.Batch(id), s.Store.K.BatchDone(id), s.Store.K.BatchIDs(id)}, argv...).Int()
	if err != nil {
		return false, fmt.Errorf("batch: finishing %s: %w", id, err)
	}
	if n == 1 {
		s.Store.R.SRem(ctx, s.Store.K.ActiveBatches(), id)
	}
	return n == 1, nil
}

// loadBatch reads the batch named in the path as its tenant sees it; it has answered
// when it returns nil.
func (s *Service) loadBatch(w http.ResponseWriter, r *http.Request) *record {
	id := r.PathValue("id")
	b, err := s.load(r.Context(), id)
	if errors.Is(err, errNoBatch) || err == nil && b.Tenant != httpx.Tenant(r) {
		httpx.WriteError(w, http.StatusNotFound, "invalid_request_error", "batch_not_found", "id", fmt.Sprintf("No such batch: %q.", id))
		return nil
	}
	if err != nil {
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading the batch failed.")
		return nil
	}
	return b
}

// getBatch is GET /v1/batches/{id}. Looking at a batch that seems stuck also asks the
// expander to repair it (see repairIfStale).
func (s *Service) getBatch(w http.ResponseWriter, r *http.Request) {
	b := s.loadBatch(w, r)
	if b == nil {
		return
	}
	s.repairIfStale(r.Context(), b)
	httpx.WriteJSON(w, http.StatusOK, b.view())
}

// cancelBatch is POST /v1/batches/{id}/cancel: the batch moves to cancelling at once;
// the expander then cancels its unfinished jobs and writes the partial output.
// Cancelling a batch that is cancelling or cancelled again answers it as it is.
func (s *Service) cancelBatch(w http.ResponseWriter, r *http.Request) {
	b := s.loadBatch(w, r)
	if b == nil {
		return
	}
	ctx := r.Context()
	st, err := requestCancel.Run(ctx, s.Store.R, []string{s.Store.K.Batch(b.ID)}, state.Millis(time.Now())).Text()
	if err != nil {
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Cancelling failed; try again.")
		return
	}
	if st != statusCancelling && st != statusCancelled {
		httpx.WriteError(w, http.StatusConflict, "invalid_request_error", "batch_not_cancellable", "",
			fmt.Sprintf("Cannot cancel a batch with status %q.", st))
		return
	}
	if st == statusCancelling {
		if err := s.kick(ctx, b.ID, b.Tenant, "cancel"); err != nil {
			s.Log.Warn("batch: queueing the cancel", "batch", b.ID, "err", err)
		}
	}
	if b, err = s.load(ctx, b.ID); err != nil {
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading the batch failed.")
		return
	}
	httpx.WriteJSON(w, http.StatusOK, b.view())
}

// listBatches is GET /v1/batches: the tenant's batches, newest first, paged with
// limit (1..100, default 20) and after.
func (s *Service) listBatches(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := listLimit(w, q.Get("limit"), 20, 100)
	if !ok {
		return
	}
	tenant := httpx.Tenant(r)
	zkey := s.Store.K.TenantBatches(tenant)
	batches, more, err := page(r.Context(), s, zkey, q.Get("after"), limit, false,
		func(ctx context.Context, id string) (batchView, bool, error) {
			b, err := s.load(ctx, id)
			if errors.Is(err, errNoBatch) {
				s.Store.R.ZRem(ctx, zkey, id) // expired: drop it from the list
				return batchView{}, false, nil
			}
			if err != nil {
				return batchView{}, false, err
			}
			return b.view(), true, nil
		})
	if err != nil {
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Listing batches failed.")
		return
	}
	httpx.WriteJSON(w, http.StatusOK, listOf(batches, func(v batchView) string { return v.ID }, more))
}
