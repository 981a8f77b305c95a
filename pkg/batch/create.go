package batch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Batch creation limits.
const (
	// defaultWindow is the completion window when the client names none: OpenAI's
	// only one. Other Go durations from minWindow to maxWindow are accepted too.
	defaultWindow = "24h"
	minWindow     = time.Second
	maxWindow     = 7 * 24 * time.Hour
	// maxQueryBytes bounds one question of the simple form.
	maxQueryBytes = 32 << 10
)

// CreateParams are the fields of both forms of a new batch: the OpenAI shape
// ({input_file_id, endpoint, completion_window, metadata}) or the simple form
// ({queries, model, metadata, callback}). Callback is an extension of the OpenAI
// shape: {url, events?} as for POST /v1/jobs.
type CreateParams struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
	Callback         json.RawMessage   `json:"callback"`
	// Queries and Model make the simple form: each query is a chat request with that
	// one user message, custom_id "q-<n>" (n from 1). With Endpoint "/v1/research"
	// each query is a research run's input instead: its line's body is Research (the
	// request fields every run shares: effort, budget, instructions, output_schema,
	// agent, metadata) with the query as input and Model (a research model,
	// "research/<model>") as model.
	Queries  []string        `json:"queries"`
	Model    string          `json:"model"`
	Research json.RawMessage `json:"research"`

	// streamed holds the questions CreateFrom stored as it read them (then Queries
	// is nil).
	streamed *queryInput
}

// Create starts a batch of tenant's. Every line is validated before anything is
// created (a refusal is an *Error); the batch is then recorded and queued for
// expansion, and returned as status "validating", with the callback's signing secret
// when one was made for it.
func (s *Service) Create(ctx context.Context, tenant string, p *CreateParams) (_ View, err error) {
	defer func() {
		if err != nil && p.streamed != nil {
			p.streamed.abort()
		}
	}()
	b, err := newRecord(tenant, p)
	if err != nil {
		return View{}, err
	}
	release, err := s.holdBatchSlot(ctx, b)
	if err != nil {
		return View{}, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	secret, err := s.takeCallback(ctx, b, p.Callback)
	if err != nil {
		return View{}, err
	}
	var ids []string
	if p.Queries != nil || p.streamed != nil {
		ids, err = s.inputFromQueries(ctx, b, p)
	} else {
		ids, err = s.inputFromFile(ctx, b, p)
	}
	if err != nil {
		return View{}, err
	}
	if err := s.start(ctx, b, ids); err != nil {
		return View{}, err
	}
	v := ViewOf(b)
	v.WebhookSecret = secret
	return v, nil
}

// takeCallback validates the batch's callback, if it has one, through the webhook
// service, which also makes the batch a signing secret when the tenant has none.
func (s *Service) takeCallback(ctx context.Context, b *record, callback json.RawMessage) (secret string, err error) {
	if len(callback) == 0 || string(callback) == "null" {
		return "", nil
	}
	if s.Webhooks == nil {
		return "", invalid("", "callback", "callbacks are not enabled on this server")
	}
	stored, secret, err := s.Webhooks.ParseCallback(ctx, b.Tenant, b.ID, callback)
	if err != nil {
		return "", invalid("invalid_callback", "callback", "%s", err.Error())
	}
	b.Callback = stored
	return secret, nil
}

// newRecord checks the fields both forms share and builds the batch record.
func newRecord(tenant string, p *CreateParams) (*record, error) {
	if p.Endpoint != "" && p.Endpoint != chatEndpoint && p.Endpoint != researchEndpoint {
		return nil, invalid("", "endpoint", "endpoint %q is not supported; batches run %q or %q", p.Endpoint, chatEndpoint, researchEndpoint)
	}
	p.CompletionWindow = cmp.Or(p.CompletionWindow, defaultWindow)
	window, err := time.ParseDuration(p.CompletionWindow)
	if err != nil || window < minWindow || window > maxWindow {
		return nil, invalid("", "completion_window", "completion_window %q must be a duration such as \"24h\" (from %s to %s)", p.CompletionWindow, minWindow, maxWindow)
	}
	if msg := checkMetadata(p.Metadata); msg != "" {
		return nil, invalid("", "metadata", "%s", msg)
	}
	if _, e := batchCap(p.Metadata); e != nil {
		return nil, e
	}
	now := time.Now().UTC()
	return &record{ID: state.NewID("batch_"), Tenant: tenant, Status: state.BatchValidating, Endpoint: chatEndpoint,
		Window: p.CompletionWindow, Metadata: p.Metadata, Created: now, Expires: now.Add(window)}, nil
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
// since the upload). It returns the custom_ids.
func (s *Service) inputFromFile(ctx context.Context, b *record, p *CreateParams) ([]string, error) {
	if p.InputFileID == "" {
		return nil, invalid("", "input_file_id", "input_file_id is required (or send {\"queries\": [...]})")
	}
	f, err := s.Store.GetFile(ctx, p.InputFileID)
	if errors.Is(err, state.ErrNotFound) || err == nil && f.Tenant != b.Tenant {
		return nil, &Error{Kind: NotFound, Code: "file_not_found", Param: "input_file_id", Message: fmt.Sprintf("No such file: %q.", redact.Clip(p.InputFileID, 64))}
	}
	if err == nil && f.Purpose != PurposeBatch {
		return nil, invalid("", "input_file_id", "File %s has purpose %q; a batch input needs purpose \"batch\".", f.ID, f.Purpose)
	}
	var v *Validation
	if err == nil {
		v, err = s.validateStored(ctx, f.ID)
	}
	if err != nil {
		s.Log.Error("batch: reading an input file", "file", p.InputFileID, "err", err)
		return nil, unavailable(err, "Could not read the input file; try again.")
	}
	if v.Invalid > 0 {
		return nil, &Error{Kind: Invalid, Param: "input_file_id", Input: v, Message: "invalid batch input"}
	}
	if p.Endpoint != "" && p.Endpoint != v.Endpoint {
		return nil, invalid("", "endpoint", "endpoint %q does not match the input's lines, which name %q", p.Endpoint, v.Endpoint)
	}
	b.InputFileID, b.Model, b.Total, b.Endpoint = f.ID, v.Model, v.Requests, v.Endpoint
	return v.CustomIDs, nil
}

// validateStored validates a stored file.
func (s *Service) validateStored(ctx context.Context, id string) (*Validation, error) {
	rc, err := s.OpenFile(ctx, id)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return validate(rc, s.Models, s.Research)
}

// inputFromQueries turns the simple form into an input file (stored, so the batch
// reads like any other): one chat request per question. The questions CreateFrom
// streamed are stored already; others are streamed into the store now. It returns the
// custom_ids.
func (s *Service) inputFromQueries(ctx context.Context, b *record, p *CreateParams) ([]string, error) {
	if p.InputFileID != "" {
		return nil, invalid("", "queries", "Send either queries or input_file_id, not both.")
	}
	endpoint := cmp.Or(p.Endpoint, chatEndpoint)
	in := p.streamed
	if in == nil {
		p.Model = cmp.Or(p.Model, s.queryModel(endpoint))
		if p.Model == "" {
			return nil, invalid("", "model", "model is required with queries; available models: %s", strings.Join(s.queryModels(endpoint), ", "))
		}
		var err error
		if in, err = s.newQueryInput(ctx, b.Tenant, endpoint, p.Model, p.Research); err != nil {
			return nil, err
		}
		p.streamed = in
		for _, q := range p.Queries {
			in.add(q)
		}
	} else if endpoint != in.endpoint || !bytes.Equal(compactJSON(p.Research), in.research) {
		// The questions were written as lines as they were read: what the lines are
		// must be known before them.
		return nil, invalid("", "endpoint", "endpoint and research must come before queries in the body")
	} else if p.Model != in.model {
		return nil, invalid("", "model", "model %q does not match the model %q the queries were read for", p.Model, in.model)
	}
	v := in.va.result()
	if v.Invalid > 0 {
		return nil, &Error{Kind: Invalid, Param: "queries", Input: v, Message: "invalid batch input"}
	}
	f := in.file
	f.Filename, f.Created, f.Expires = b.ID+"_queries.jsonl", b.Created, b.Expires.Add(s.Store.RecordRetention())
	size, err := in.obj.finish()
	if err == nil {
		f.Bytes = size
		err = s.Store.SaveFile(ctx, f)
	}
	if err != nil {
		if e, ok := errors.AsType[*Error](err); ok {
			return nil, e
		}
		s.Log.Error("batch: storing queries", "err", err)
		return nil, unavailable(err, "Could not store the queries; try again.")
	}
	b.InputFileID, b.Model, b.Total, b.Endpoint = f.ID, v.Model, v.Requests, cmp.Or(v.Endpoint, chatEndpoint)
	return v.CustomIDs, nil
}

// queryModel is the model of the simple form's lines to endpoint when the body names
// none: the one model the fleet serves (for research lines, its research model),
// else "".
func (s *Service) queryModel(endpoint string) string {
	if ms := s.queryModels(endpoint); len(ms) == 1 {
		return ms[0]
	}
	return ""
}

// queryModels are the models the simple form's lines to endpoint may name.
func (s *Service) queryModels(endpoint string) []string {
	if endpoint != researchEndpoint {
		return s.Models
	}
	var out []string
	if s.Research != nil {
		for _, m := range s.Research.Models {
			out = append(out, research.ModelPrefix+m)
		}
	}
	return out
}

// queryInput is the input file of the simple form, streamed into the object store a
// question at a time as it is validated.
type queryInput struct {
	endpoint, model string
	// research is the research request fields every line to researchEndpoint
	// shares (CreateParams.Research), shared those fields decoded.
	research json.RawMessage
	shared   map[string]json.RawMessage
	va       *validator
	n        int
	file     *state.File
	obj      *objectWriter
	err      error
}

// newQueryInput starts the input file of tenant's questions: lines to endpoint for
// model, a research line's body the shared fields given.
func (s *Service) newQueryInput(ctx context.Context, tenant, endpoint, model string, shared json.RawMessage) (*queryInput, error) {
	in := &queryInput{endpoint: endpoint, model: model, research: compactJSON(shared)}
	if len(shared) > 0 && string(shared) != "null" {
		if endpoint != researchEndpoint {
			return nil, invalid("", "research", "research is given with queries to %q only", researchEndpoint)
		}
		if err := json.Unmarshal(shared, &in.shared); err != nil || in.shared == nil {
			return nil, invalid("", "research", "research must be an object: the research request fields every run shares")
		}
		for _, k := range []string{"input", "model", "callback"} {
			if _, ok := in.shared[k]; ok {
				return nil, invalid("", "research."+k, "research.%s is not shared: each query is a run's input, model is the batch's, and the batch's callback tells its end", k)
			}
		}
	}
	if _, err := s.checkFileQuota(ctx, tenant); err != nil {
		return nil, err
	}
	f := &state.File{ID: state.NewID("file-"), Tenant: tenant, Purpose: PurposeBatch, Created: time.Now().UTC()}
	obj, err := s.createObject(ctx, f)
	if err != nil {
		return nil, unavailable(err, "Could not store the queries; try again.")
	}
	in.va, in.file, in.obj = newValidator(s.Models, s.Research), f, obj
	return in, nil
}

// add validates the next question and writes its line; once a line is invalid
// nothing more is written (the input will be refused), but every line is checked.
func (in *queryInput) add(q string) {
	i := in.n
	in.n++
	if e := checkQuery(i, q); e != nil {
		in.va.fail(*e)
		return
	}
	body := queryBody(in.model, q)
	if in.endpoint == researchEndpoint {
		body = researchBody(in.shared, in.model, q)
	}
	line, _ := json.Marshal(inputLine{CustomID: "q-" + strconv.Itoa(i+1), Method: "POST", URL: in.endpoint, Body: body})
	in.va.line(i+1, line)
	if in.va.v.Invalid == 0 && in.err == nil {
		_, in.err = in.obj.Write(append(line, '\n'))
	}
}

// abort drops the input file (once finished, the record's expiry removes it).
func (in *queryInput) abort() { in.obj.abort() }

// holdBatchSlot takes one of the tenant's unfinished-batch slots for b (released by
// the returned function, or when b ends: batchEnded).
func (s *Service) holdBatchSlot(ctx context.Context, b *record) (func(), error) {
	limit := s.Limits.Of(b.Tenant).Batches
	took, err := s.Store.AcquireLease(ctx, state.LeaseBatches, b.Tenant, b.ID, limit, time.Until(b.Expires)+time.Hour)
	if err != nil {
		return nil, unavailable(err, "Could not check the batch limit; try again.")
	}
	if !took {
		return nil, s.limited(b.Tenant, "batches", "Too many unfinished batches: at most %d at once; retry when one has ended.", limit)
	}
	return func() { s.batchEnded(context.WithoutCancel(ctx), b.Tenant, b.ID) }, nil
}

// batchEnded frees the slot of a batch that ended.
func (s *Service) batchEnded(ctx context.Context, tenant, id string) {
	if err := s.Store.ReleaseLease(ctx, state.LeaseBatches, tenant, id); err != nil {
		s.Log.Warn("batch: freeing a batch slot (it expires on its own)", "batch", id, "err", err)
	}
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

// compactJSON is raw without insignificant space (nil for nothing, or for what is
// not JSON).
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}

// researchBody is the research request of one question: the shared fields, the
// question as input and model.
func researchBody(shared map[string]json.RawMessage, model, q string) json.RawMessage {
	m := make(map[string]any, len(shared)+2)
	for k, v := range shared {
		m[k] = v
	}
	m["input"], m["model"] = q, model
	b, _ := json.Marshal(m)
	return b
}

// start records the validated batch and queues its expansion.
func (s *Service) start(ctx context.Context, b *record, ids []string) error {
	if err := s.capSpend(ctx, b); err != nil {
		return err
	}
	if err := s.Store.CreateBatch(ctx, b, ids); err != nil {
		s.Log.Error("batch: recording", "batch", b.ID, "err", err)
		return unavailable(err, "Could not record the batch; try again.")
	}
	if err := s.Bus.Publish(ctx, bus.SubjectExpand, bus.BatchExpand{BatchID: b.ID, Tenant: b.Tenant}); err != nil {
		s.Log.Error("batch: queueing expansion", "batch", b.ID, "err", err)
		s.failBatch(context.WithoutCancel(ctx), b, newLineError(0, "queue_unavailable", "", "the batch could not be queued: %v", err))
		e := unavailable(err, "The fleet could not take the batch; try again.")
		e.RetryAfter = time.Second
		return e
	}
	return nil
}

// failBatch ends a batch that cannot run as failed, with the reason as its error.
func (s *Service) failBatch(ctx context.Context, b *record, e lineError) {
	moved, err := s.Store.FinishBatch(ctx, b.ID, state.BatchFailed, state.BatchEnd{Errors: []lineError{e}})
	if err != nil {
		s.Log.Error("batch: marking failed", "batch", b.ID, "err", err)
	}
	if moved {
		s.Log.Warn("batch failed", "batch", b.ID, "reason", e.Message)
		s.batchEnded(ctx, b.Tenant, b.ID)
	}
}

// tenantBatch reads a batch as its tenant sees it: another tenant's is NotFound.
func (s *Service) tenantBatch(ctx context.Context, tenant, id string) (*record, error) {
	b, err := s.Store.GetBatch(ctx, id)
	if errors.Is(err, state.ErrNotFound) || err == nil && b.Tenant != tenant {
		return nil, &Error{Kind: NotFound, Code: "batch_not_found", Param: "id", Message: fmt.Sprintf("No such batch: %q.", redact.Clip(id, 64))}
	}
	if err != nil {
		return nil, unavailable(err, "Reading the batch failed.")
	}
	return b, nil
}

// Get returns a batch of tenant's. Looking at a batch that seems stuck also asks the
// expander to repair it (see repairIfStale).
func (s *Service) Get(ctx context.Context, tenant, id string) (View, error) {
	b, err := s.tenantBatch(ctx, tenant, id)
	if err != nil {
		return View{}, err
	}
	s.repairIfStale(ctx, b)
	return ViewOf(b), nil
}

// Cancel moves a batch of tenant's to cancelling at once; the expander then cancels
// its unfinished jobs and writes the partial output. Cancelling a batch that is
// cancelling or cancelled again returns it as it is; one that ended otherwise is a
// Conflict.
func (s *Service) Cancel(ctx context.Context, tenant, id string) (View, error) {
	b, err := s.tenantBatch(ctx, tenant, id)
	if err != nil {
		return View{}, err
	}
	st, err := s.Store.CancelBatch(ctx, b.ID)
	if err != nil {
		return View{}, unavailable(err, "Cancelling failed; try again.")
	}
	if st != state.BatchCancelling && st != state.BatchCancelled {
		return View{}, &Error{Kind: Conflict, Code: "batch_not_cancellable", Message: fmt.Sprintf("Cannot cancel a batch with status %q.", st)}
	}
	if st == state.BatchCancelling {
		if err := s.kick(ctx, b.ID, b.Tenant, "cancel"); err != nil {
			s.Log.Warn("batch: queueing the cancel", "batch", b.ID, "err", err)
		}
	}
	if b, err = s.Store.GetBatch(ctx, b.ID); err != nil {
		return View{}, unavailable(err, "Reading the batch failed.")
	}
	return ViewOf(b), nil
}

// List returns up to limit of tenant's batches, newest first, after the batch after
// (none: from the newest), and whether more follow.
func (s *Service) List(ctx context.Context, tenant, after string, limit int) ([]View, bool, error) {
	return page(ctx, s.Store.TenantBatches(ctx, tenant, after), limit,
		func(ctx context.Context, id string) (View, bool, error) {
			b, err := s.Store.GetBatch(ctx, id)
			if errors.Is(err, state.ErrNotFound) {
				s.Store.ForgetTenantBatch(ctx, tenant, id) // expired: drop it from the list
				return View{}, false, nil
			}
			if err != nil {
				return View{}, false, err
			}
			return ViewOf(b), true, nil
		})
}
