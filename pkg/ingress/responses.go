package ingress

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/ingress/responsesws"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A Responses request may lean on what the fleet stored: previous_response_id (the
// conversation of an earlier response and its answer come before the input),
// item_reference input items (an item of a stored response), input_file parts naming
// a file_id of POST /v1/files. resolveResponses turns them into a self-contained
// request before the codec reads it, within the caller's tenant only. A response
// created with store: false is not stored, and naming it is an error like naming one
// that never existed.

// responsesRequest is a Responses request body with what the fleet stored resolved
// into it.
type responsesRequest struct {
	// body is the request with previous_response_id removed and its input complete.
	body []byte
	// input is the complete input as items (what a later request's
	// previous_response_id resolves to, with this response's answer).
	input json.RawMessage
	// echo is what the response repeats of the request as the client sent it.
	echo map[string]json.RawMessage
	// store is false when the request asked not to be stored.
	store bool
	// prior is how many of input's items came before the request's own.
	prior int
	// conversation is the conversation the request continues ("" none).
	conversation string
	// saved is the stored response (saveResponse; nil: not stored).
	saved *state.StoredResponse
}

// resolveResponses reads what a Responses request names from the tenant's stored
// responses and files.
func (s *Server) resolveResponses(ctx context.Context, tenant string, body []byte) (*responsesRequest, *wire.Error) {
	top := map[string]json.RawMessage{}
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return &responsesRequest{body: body, store: true}, nil // the codec says what is wrong
	}
	rr := &responsesRequest{echo: responses.Echo(body), store: string(bytes.TrimSpace(top["store"])) != "false"}
	if !rr.store && string(bytes.TrimSpace(top["background"])) == "true" {
		return nil, wire.Invalid("background", "background mode needs the response stored: 'store' cannot be false with 'background': true")
	}
	var items []json.RawMessage
	if raw, ok := top["input"]; ok {
		var text string
		switch {
		case json.Unmarshal(raw, &text) == nil:
			item, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": text})
			items = []json.RawMessage{item}
		case json.Unmarshal(raw, &items) != nil:
			return &responsesRequest{body: body, echo: rr.echo, store: rr.store}, nil // the codec says what is wrong
		}
	}
	x, e := newExpansion(s.MaxBody, body, items) // what it names is bounded (expand.go)
	if e != nil {
		return nil, e
	}
	var prior []json.RawMessage
	raw := top["previous_response_id"]
	continues := !isNullJSON(raw)
	if continues {
		var id string
		if json.Unmarshal(raw, &id) != nil || id == "" {
			return nil, wire.Invalid("previous_response_id", "'previous_response_id' must be a response id")
		}
		if t := responsesws.TurnOf(ctx); t != nil {
			prior = t.Conversation(id) // a response of this socket's (pkg/ingress/responsesws)
		}
		if prior == nil {
			if prior, e = s.storedConversation(ctx, tenant, id); e != nil {
				return nil, e
			}
		}
		if e := x.addItems("previous_response_id", prior); e != nil {
			return nil, e
		}
		delete(top, "previous_response_id")
	}
	if raw := top["conversation"]; !isNullJSON(raw) {
		if continues {
			return nil, wire.Invalid("conversation", "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.")
		}
		if !rr.store {
			return nil, wire.Invalid("conversation", "A response that continues a conversation is added to it: 'store' cannot be false with 'conversation'.")
		}
		id, items, e := s.conversationInput(ctx, tenant, raw)
		if e != nil {
			return nil, e
		}
		if e := x.addItems("conversation", items); e != nil {
			return nil, e
		}
		prior, rr.conversation = items, id
		rr.echo["conversation"], _ = json.Marshal(map[string]string{"id": id})
		delete(top, "conversation")
	}
	resolved := make([]json.RawMessage, 0, len(prior)+len(items))
	resolved = append(resolved, prior...)
	rr.prior = len(prior)
	refs := s.newReferences(ctx, tenant, prior, items)
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		if id, ok := itemReference(it); ok {
			ref, e := refs.item(param, id)
			if e == nil {
				e = x.add(param, int64(len(ref)))
			}
			if e != nil {
				return nil, e
			}
			resolved = append(resolved, ref)
			continue
		}
		it, e := s.withFiles(ctx, tenant, param, it, x)
		if e != nil {
			return nil, e
		}
		resolved = append(resolved, it)
	}
	rr.input, _ = json.Marshal(resolved)
	if t := responsesws.TurnOf(ctx); t != nil {
		t.SetInput(rr.input)
	}
	if len(resolved) > 0 {
		top["input"] = rr.input
	}
	rr.body, _ = json.Marshal(top)
	return rr, nil
}

func isNullJSON(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// responseNotFound is the error for a previous_response_id the tenant does not have,
// as OpenAI answers it (400 previous_response_not_found).
func responseNotFound(param, id string) *wire.Error {
	return &wire.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "previous_response_not_found", Param: param,
		Message: fmt.Sprintf("Previous response with id '%s' not found.", redact.Clip(id, 64))}
}

// storedResponse loads a stored response and its job, within tenant.
func (s *Server) storedResponse(ctx context.Context, tenant, param, id string) (*state.StoredResponse, *state.Job, *wire.Error) {
	if !validJobID(id) || !strings.HasPrefix(id, "resp_") {
		return nil, nil, responseNotFound(param, id)
	}
	rec, err := s.Store.Jobs.GetResponse(ctx, id)
	if err == nil && rec.Tenant != tenant {
		err = state.ErrNotFound
	}
	var job *state.Job
	if err == nil {
		job, err = s.Store.Jobs.GetJob(ctx, id)
	}
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil, nil, responseNotFound(param, id)
	case err != nil:
		s.Log.Warn("api: reading a stored response", "response", id, "err", err)
		return nil, nil, unavailable("Reading the stored response")
	}
	return rec, job, nil
}

// storedConversation is the conversation a previous_response_id continues: the
// stored response's input items, then its answer's output items. The response must
// have completed.
func (s *Server) storedConversation(ctx context.Context, tenant, id string) ([]json.RawMessage, *wire.Error) {
	rec, job, e := s.storedResponse(ctx, tenant, "previous_response_id", id)
	if e != nil {
		return nil, e
	}
	output, e := outputItems(job, rec)
	if e != nil {
		return nil, e
	}
	var items []json.RawMessage
	if err := json.Unmarshal(rec.Input, &items); err != nil {
		return nil, &wire.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: "The stored response is unreadable."}
	}
	return append(items, output...), nil
}

// storedRequest is a job's request as it was stored (wire.Stored), nil if unreadable.
func storedRequest(job *state.Job) *wire.Request {
	if stored, err := wire.DecodeStored(job.Request); err == nil {
		return stored.Request
	}
	return nil
}

// outputItems are a stored response's output items, as its client was shown them; an
// error when it has not completed.
func outputItems(job *state.Job, rec *state.StoredResponse) ([]json.RawMessage, *wire.Error) {
	resp, e := answerOf(job, storedRequest(job), wire.OpenAIResponses)
	if e != nil || resp.Status != wire.StatusCompleted {
		return nil, wire.Invalid("previous_response_id", "The response %s is %s: only a completed response can be continued.", job.ID, resp.Status)
	}
	resp.Echo = rec.Echo
	b, err := responses.Client.EncodeResponse(resp)
	if err != nil {
		return nil, wire.AsError(err)
	}
	var o struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, wire.AsError(err)
	}
	return o.Output, nil
}

// references resolves the item_reference items of one request: an item of the
// conversation before the input (previous_response_id's), or an output item of a
// stored response of the tenant. The fleet's output item ids name their response
// (wire.ItemResponse); an item whose id does not (a reasoning item keeps its model's
// id) is looked for in the responses the request's other items name, as a client
// that sends a response's output back by reference sends all of it. Each response is
// read once.
type references struct {
	s      *Server
	ctx    context.Context
	tenant string
	prior  []json.RawMessage
	// named are the responses the request's items name, in order; outputs their
	// output items once read (nil: not readable).
	named   []string
	outputs map[string][]json.RawMessage
}

func (s *Server) newReferences(ctx context.Context, tenant string, prior, items []json.RawMessage) *references {
	refs := &references{s: s, ctx: ctx, tenant: tenant, prior: prior, outputs: map[string][]json.RawMessage{}}
	for _, it := range items {
		if id := responses.ItemResponse(itemID(it)); id != "" && !slices.Contains(refs.named, id) && len(refs.named) < maxNamedResponses {
			refs.named = append(refs.named, id)
		}
	}
	return refs
}

// maxNamedResponses bounds the stored responses one request's references read.
const maxNamedResponses = 32

// output is the output items of the tenant's stored response id (nil: none, or not
// completed).
func (r *references) output(id string) []json.RawMessage {
	if out, ok := r.outputs[id]; ok {
		return out
	}
	var out []json.RawMessage
	if rec, job, e := r.s.storedResponse(r.ctx, r.tenant, "", id); e == nil {
		out, _ = outputItems(job, rec)
	}
	r.outputs[id] = out
	return out
}

// item is the item an item_reference at param names.
func (r *references) item(param, id string) (json.RawMessage, *wire.Error) {
	if it := findItem(r.prior, id); it != nil {
		return it, nil
	}
	if resp := responses.ItemResponse(id); resp != "" {
		if it := findItem(r.output(resp), id); it != nil {
			return it, nil
		}
	} else {
		for _, resp := range r.named {
			if it := findItem(r.output(resp), id); it != nil {
				return it, nil
			}
		}
	}
	return nil, &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "item_not_found", Param: param + ".id",
		Message: fmt.Sprintf("Item with id '%s' not found. An item_reference names an item of a stored response of this tenant, or of the conversation before the input.", redact.Clip(id, 64))}
}

// findItem is the item of items with id (nil: none).
func findItem(items []json.RawMessage, id string) json.RawMessage {
	for _, it := range items {
		var head struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(it, &head) == nil && head.ID == id {
			return it
		}
	}
	return nil
}

// withFiles replaces the file_id of an input item's input_file parts by the file's
// content (file_data), read from the tenant's files, within x.
func (s *Server) withFiles(ctx context.Context, tenant, param string, item json.RawMessage, x *expansion) (json.RawMessage, *wire.Error) {
	if !bytes.Contains(item, []byte(`"file_id"`)) {
		return item, nil
	}
	var it map[string]json.RawMessage
	if json.Unmarshal(item, &it) != nil {
		return item, nil
	}
	field := "content"
	if _, ok := it["output"]; ok {
		field = "output"
	}
	var parts []map[string]json.RawMessage
	if json.Unmarshal(it[field], &parts) != nil {
		return item, nil
	}
	for i, p := range parts {
		var typ, id string
		json.Unmarshal(p["type"], &typ)
		if typ != "input_file" || json.Unmarshal(p["file_id"], &id) != nil || id == "" {
			continue
		}
		at := fmt.Sprintf("%s.%s[%d].file_id", param, field, i)
		data, name, e := s.fileData(ctx, tenant, at, id, x)
		if e != nil {
			return nil, e
		}
		delete(p, "file_id")
		p["file_data"], _ = json.Marshal(data)
		if isNullJSON(p["filename"]) {
			p["filename"], _ = json.Marshal(name)
		}
	}
	it[field], _ = json.Marshal(parts)
	b, _ := json.Marshal(it)
	return b, nil
}

// fileData is a tenant's file as base64, with its name; its size is counted in x
// before it is read.
func (s *Server) fileData(ctx context.Context, tenant, param, id string, x *expansion) (data, name string, e *wire.Error) {
	notFound := &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "file_not_found", Param: param,
		Message: fmt.Sprintf("No file with id '%s'.", redact.Clip(id, 64))}
	if s.Batches == nil {
		return "", "", notFound
	}
	f, err := s.Store.Files.GetFile(ctx, id)
	if errors.Is(err, state.ErrNotFound) || err == nil && f.Tenant != tenant {
		return "", "", notFound
	}
	if err == nil && f.Bytes > s.MaxBody {
		return "", "", wire.Invalid(param, "The file '%s' is %d bytes; a file given to a model may have at most %d.", redact.Clip(id, 64), f.Bytes, s.MaxBody)
	}
	if err == nil {
		if e := x.add(param, 4*((f.Bytes+2)/3)); e != nil { // its base64
			return "", "", e
		}
	}
	var content []byte
	if err == nil {
		var rc io.ReadCloser
		if rc, err = s.Batches.OpenFile(ctx, id); err == nil {
			content, err = io.ReadAll(io.LimitReader(rc, s.MaxBody+1))
			rc.Close()
		}
	}
	if err != nil {
		s.Log.Warn("api: reading an input file", "file", id, "err", err)
		return "", "", unavailable("Reading the file")
	}
	return base64.StdEncoding.EncodeToString(content), f.Filename, nil
}

// saveResponse stores a Responses request's conversation and settings under its job
// id, unless the request said store: false.
func (s *Server) saveResponse(ctx context.Context, job *state.Job, rr *responsesRequest) {
	if rr == nil || !rr.store {
		return
	}
	rec := &state.StoredResponse{Tenant: job.Tenant, Input: rr.input, Echo: rr.echo, Prior: rr.prior, Conversation: rr.conversation}
	rr.saved = rec
	job.HasStoredResponse = true // noted in the job's record when it is created (its archiving reads the response)
	if err := s.Store.Jobs.SaveResponse(context.WithoutCancel(ctx), job.ID, rec); err != nil {
		// The answer still reaches the client; only a later reference to it fails.
		s.Log.Warn("api: storing a response", "response", job.ID, "err", err)
	}
}
