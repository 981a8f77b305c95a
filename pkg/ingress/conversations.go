package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The Conversations API (/v1/conversations): a tenant's conversations, each a list of
// Responses items. A Responses request naming one (conversation: "conv_…" or
// {"id": "conv_…"}) runs on its items followed by the request's input, and once the
// response completes its input and output items are added to it (addTurn: by the
// ingress that answers a synchronous or streamed request before it answers, and by
// the finisher for every response, which adds a turn only once). A conversation is
// charged to its tenant's storage quota like a job record and kept for the retention
// period from its last write; another tenant's conversation is not found.

// maxItemsPerAdd is how many items one create or add request may carry (OpenAI's 20).
const maxItemsPerAdd = 20

// conversationOverhead is what a conversation's record takes beside its items, as the
// storage quota counts it.
const conversationOverhead = 256

// notFound is OpenAI's answer for a what (a conversation, an item, a stored response)
// the tenant has no id of, named by param.
func notFound(param, what, id string) *wire.Error {
	return &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: param,
		Message: fmt.Sprintf("%s with id '%s' not found.", what, redact.Clip(id, 64))}
}

func conversationNotFound(id string) *wire.Error {
	return notFound("conversation_id", "Conversation", id)
}

func unavailable(what string) *wire.Error {
	return &wire.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: what + " failed; try again."}
}

func conversationObject(c *state.Conversation) map[string]any {
	return map[string]any{"id": c.ID, "object": "conversation", "created_at": c.Created.Unix(), "metadata": c.Metadata}
}

// conversation reads the tenant's conversation id.
func (s *Server) conversation(ctx context.Context, tenant, id string) (*state.Conversation, *wire.Error) {
	if !validJobID(id) || !strings.HasPrefix(id, "conv_") {
		return nil, conversationNotFound(id)
	}
	c, err := s.Store.Conversations.GetConversation(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound) || err == nil && c.Tenant != tenant:
		return nil, conversationNotFound(id)
	case err != nil:
		s.Log.Warn("api: reading a conversation", "conversation", id, "err", err)
		return nil, unavailable("Reading the conversation")
	}
	return c, nil
}

// loadConversation reads the conversation the path names; it has answered when it
// returns nil.
func (s *Server) loadConversation(w http.ResponseWriter, r *http.Request) *state.Conversation {
	c, e := s.conversation(r.Context(), tenantOf(r), r.PathValue("id"))
	if e != nil {
		writeWireError(w, responses.Client, e)
	}
	return c
}

// objectBody reads a Responses JSON object body whose keys are among allowed (an
// empty body is {} when empty is set); an unknown key's refusal ends with hint. It
// has answered when it returns false.
func (s *Server) objectBody(w http.ResponseWriter, r *http.Request, empty bool, hint string, allowed []string) (map[string]json.RawMessage, bool) {
	body, ok := s.readBody(w, r)
	if !ok {
		return nil, false
	}
	var top map[string]json.RawMessage
	if empty && len(strings.TrimSpace(string(body))) == 0 {
		top = map[string]json.RawMessage{}
	} else if err := json.Unmarshal(body, &top); err != nil || top == nil {
		writeWireError(w, responses.Client, wire.Invalid("", "The request body must be a JSON object."))
		return nil, false
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(allowed, k) {
			writeWireError(w, responses.Client, wire.Invalid(k, "Unknown parameter: '%s'.%s", redact.Clip(k, 64), hint))
			return nil, false
		}
	}
	return top, true
}

// conversationMetadata reads a metadata parameter: at most 16 string values, keys of
// at most 64 characters and values of at most 512.
func conversationMetadata(raw json.RawMessage) (map[string]string, *wire.Error) {
	md := map[string]string{}
	if isNullJSON(raw) {
		return md, nil
	}
	if json.Unmarshal(raw, &md) != nil || len(md) > 16 {
		return nil, wire.Invalid("metadata", "'metadata' must be an object of at most 16 string values")
	}
	for k, v := range md {
		if len(k) > 64 || len(v) > 512 {
			return nil, wire.Invalid("metadata", "'metadata' keys are at most 64 characters and values at most 512")
		}
	}
	return md, nil
}

// itemPrefixes are the id prefixes of the items a conversation is given without an id,
// by type (any other: "item_").
var itemPrefixes = map[string]string{"message": "msg_", "function_call_output": "fco_"}

// conversationItems reads an items parameter: 1 to maxItemsPerAdd Responses input
// items (none, when optional), each checked as the Responses codec reads it, given an
// id if it has none, a message with its type, status and content parts.
func conversationItems(raw json.RawMessage, optional bool) ([]state.ConversationItem, *wire.Error) {
	var items []json.RawMessage
	if isNullJSON(raw) {
		if optional {
			return nil, nil
		}
		return nil, wire.Invalid("items", "Missing required parameter: 'items'.")
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil, wire.Invalid("items", "'items' must be an array of items")
	}
	if len(items) > maxItemsPerAdd || len(items) == 0 && !optional {
		return nil, wire.Invalid("items", "'items' must hold 1 to %d items", maxItemsPerAdd)
	}
	out := make([]state.ConversationItem, 0, len(items))
	for i, it := range items {
		param := fmt.Sprintf("items[%d]", i)
		if e := checkItem(param, it); e != nil {
			return nil, e
		}
		it = normalizeItem(it, func(typ string) string { return state.NewID(cmp.Or(itemPrefixes[typ], "item_")) })
		id := itemID(it)
		if len(id) > 128 {
			return nil, wire.Invalid(param+".id", "%s.id must be at most 128 characters", param)
		}
		out = append(out, state.ConversationItem{ID: id, Item: it})
	}
	return out, nil
}

// checkItem checks one item as the Responses codec reads an input item (a
// function_call_output alone, after a call of its call_id).
func checkItem(param string, item json.RawMessage) *wire.Error {
	var head struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
	}
	if json.Unmarshal(item, &head) != nil {
		return wire.Invalid(param, "%s must be an item object", param)
	}
	if head.Type == "item_reference" {
		return wire.Invalid(param+".type", "%s: a conversation holds items, not references", param)
	}
	input := []json.RawMessage{item}
	if head.Type == "function_call_output" && head.CallID != "" {
		call, _ := json.Marshal(map[string]string{"type": "function_call", "call_id": head.CallID, "name": "f", "arguments": "{}"})
		input = []json.RawMessage{call, item}
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "input": input})
	if _, err := responses.Client.DecodeRequest(body); err != nil {
		e := wire.AsError(err)
		at := "input[0]"
		if len(input) == 2 {
			at = "input[1]"
		}
		e.Param = strings.Replace(e.Param, at, param, 1)
		e.Message = strings.ReplaceAll(e.Message, at, param)
		return e
	}
	return nil
}

// itemsOf is the items of a conversation's entries.
func itemsOf(items []state.ConversationItem) []json.RawMessage {
	return mapped(items, func(it state.ConversationItem) json.RawMessage { return it.Item })
}

// itemsBytes is what items take as the store counts them.
func itemsBytes(items []state.ConversationItem) int64 {
	var n int64
	for _, it := range items {
		n += int64(len(it.ID) + len(it.Item))
	}
	return n
}

// chargeConversation charges a conversation's bytes to its tenant's storage quota
// until its retention from now ends; it has answered when it returns false.
func (s *Server) chargeConversation(w http.ResponseWriter, r *http.Request, tenant, id string, bytes int64) bool {
	ok, st, limit, err := s.conversationCharge(r.Context(), tenant, id, bytes, false)
	if err != nil {
		s.limitsUnavailable(w, r, responses.Client, err)
		return false
	}
	if !ok {
		s.rejected(tenant, "storage_bytes")
		writeWireError(w, responses.Client, &wire.Error{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "storage_quota_exceeded",
			Message: fmt.Sprintf("The tenant's storage quota of %d bytes is used up (%d bytes kept); records free their bytes as they expire. See GET /v1/usage.", limit, st.Used)})
	}
	return ok
}

// settleConversation charges a conversation's bytes after a write that happened.
func (s *Server) settleConversation(ctx context.Context, tenant, id string, bytes int64) {
	if _, _, _, err := s.conversationCharge(ctx, tenant, id, bytes, true); err != nil {
		s.Log.Warn("api: charging a conversation's storage", "conversation", id, "err", err)
	}
}

// conversationCharge charges a conversation's bytes (state.Ledger.ChargeRecord, force
// as it says) under its tenant's storage quota, limit (none: nothing is charged).
func (s *Server) conversationCharge(ctx context.Context, tenant, id string, bytes int64, force bool) (ok bool, st state.Storage, limit int64, err error) {
	limit = s.Limits.Of(tenant).StorageBytes
	if limit <= 0 {
		return true, st, limit, nil
	}
	expires := time.Now().Add(s.Store.Conversations.ConversationRetention())
	ok, st, err = s.Store.Ledger.ChargeRecord(ctx, tenant, id, bytes+conversationOverhead, expires, limit, force)
	return ok, st, limit, err
}

// createConversation is POST /v1/conversations: a new conversation with up to 20
// items and metadata.
func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	top, ok := s.objectBody(w, r, true, "", []string{"items", "metadata"})
	if !ok {
		return
	}
	md, e := conversationMetadata(top["metadata"])
	if e != nil {
		writeWireError(w, responses.Client, e)
		return
	}
	items, e := conversationItems(top["items"], true)
	if e != nil {
		writeWireError(w, responses.Client, e)
		return
	}
	tenant := tenantOf(r)
	c := &state.Conversation{ID: state.NewID("conv_"), Tenant: tenant, Metadata: md}
	if !s.chargeConversation(w, r, tenant, c.ID, itemsBytes(items)) {
		return
	}
	if err := s.Store.Conversations.CreateConversation(r.Context(), c, items); err != nil {
		s.Log.Warn("api: creating a conversation", "err", err)
		s.Store.Ledger.ReleaseRecord(context.WithoutCancel(r.Context()), tenant, c.ID)
		writeWireError(w, responses.Client, unavailable("Creating the conversation"))
		return
	}
	writeJSON(w, http.StatusOK, conversationObject(c))
}

// getConversation is GET /v1/conversations/{id}.
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request, c *state.Conversation) {
	writeJSON(w, http.StatusOK, conversationObject(c))
}

// updateConversation is POST /v1/conversations/{id}: its metadata replaced.
func (s *Server) updateConversation(w http.ResponseWriter, r *http.Request, c *state.Conversation) {
	top, ok := s.objectBody(w, r, true, "", []string{"metadata"})
	if !ok {
		return
	}
	if _, ok := top["metadata"]; !ok {
		writeWireError(w, responses.Client, wire.Invalid("metadata", "Missing required parameter: 'metadata'."))
		return
	}
	md, e := conversationMetadata(top["metadata"])
	if e != nil {
		writeWireError(w, responses.Client, e)
		return
	}
	if err := s.Store.Conversations.SetConversationMetadata(r.Context(), c.ID, md); err != nil {
		if errors.Is(err, state.ErrNotFound) {
			writeWireError(w, responses.Client, conversationNotFound(c.ID))
			return
		}
		writeWireError(w, responses.Client, unavailable("Updating the conversation"))
		return
	}
	c.Metadata = md
	writeJSON(w, http.StatusOK, conversationObject(c))
}

// deleteConversation is DELETE /v1/conversations/{id}: the conversation and its items
// are deleted and their bytes given back. Responses that named it are not.
func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request, c *state.Conversation) {
	if err := s.Store.Conversations.DeleteConversation(r.Context(), c.ID); err != nil {
		writeWireError(w, responses.Client, unavailable("Deleting the conversation"))
		return
	}
	if err := s.Store.Ledger.ReleaseRecord(context.WithoutCancel(r.Context()), c.Tenant, c.ID); err != nil {
		s.Log.Warn("api: releasing a deleted conversation's storage (it lapses with its expiry)", "conversation", c.ID, "err", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": c.ID, "object": "conversation.deleted", "deleted": true})
}

// listConversationItems is GET /v1/conversations/{id}/items: a cursor page
// (writeListPage).
func (s *Server) listConversationItems(w http.ResponseWriter, r *http.Request, c *state.Conversation) {
	items, err := s.Store.Conversations.ConversationItems(r.Context(), c.ID)
	if err != nil {
		writeWireError(w, responses.Client, unavailable("Reading the conversation"))
		return
	}
	writeListPage(w, r, itemsOf(items))
}

// addConversationItems is POST /v1/conversations/{id}/items: up to 20 items added at
// its end, answered as a list of them.
func (s *Server) addConversationItems(w http.ResponseWriter, r *http.Request, c *state.Conversation) {
	top, ok := s.objectBody(w, r, true, "", []string{"items"})
	if !ok {
		return
	}
	items, e := conversationItems(top["items"], false)
	if e != nil {
		writeWireError(w, responses.Client, e)
		return
	}
	if !s.chargeConversation(w, r, c.Tenant, c.ID, c.Bytes+itemsBytes(items)) {
		return
	}
	n, bytes, err := s.Store.Conversations.AddConversationItems(r.Context(), c.ID, "", items)
	switch {
	case errors.Is(err, state.ErrNotFound):
		writeWireError(w, responses.Client, conversationNotFound(c.ID))
		return
	case errors.Is(err, state.ErrConversationFull):
		writeWireError(w, responses.Client, wire.Invalid("items", "The conversation holds %d items; it may hold at most %d.", n, state.MaxConversationItems))
		return
	case err != nil:
		writeWireError(w, responses.Client, unavailable("Adding the items"))
		return
	}
	s.settleConversation(context.WithoutCancel(r.Context()), c.Tenant, c.ID, bytes)
	writeJSON(w, http.StatusOK, listOf(itemsOf(items), itemID, false))
}

// getConversationItem is GET /v1/conversations/{id}/items/{item_id}.
func (s *Server) getConversationItem(w http.ResponseWriter, r *http.Request, c *state.Conversation) {
	it, err := s.Store.Conversations.ConversationItem(r.Context(), c.ID, r.PathValue("item_id"))
	switch {
	case errors.Is(err, state.ErrNotFound):
		writeWireError(w, responses.Client, notFound("item_id", "Item", r.PathValue("item_id")))
	case err != nil:
		writeWireError(w, responses.Client, unavailable("Reading the item"))
	default:
		writeJSON(w, http.StatusOK, it)
	}
}

// deleteConversationItem is DELETE /v1/conversations/{id}/items/{item_id}: answered
// with the conversation.
func (s *Server) deleteConversationItem(w http.ResponseWriter, r *http.Request, c *state.Conversation) {
	bytes, err := s.Store.Conversations.DeleteConversationItem(r.Context(), c.ID, r.PathValue("item_id"))
	switch {
	case errors.Is(err, state.ErrNotFound):
		writeWireError(w, responses.Client, notFound("item_id", "Item", r.PathValue("item_id")))
		return
	case err != nil:
		writeWireError(w, responses.Client, unavailable("Deleting the item"))
		return
	}
	s.settleConversation(context.WithoutCancel(r.Context()), c.Tenant, c.ID, bytes)
	writeJSON(w, http.StatusOK, conversationObject(c))
}

// conversationInput is the conversation a Responses request names (conversation: an
// id or {"id": …}), with its items as the input before the request's.
func (s *Server) conversationInput(ctx context.Context, tenant string, raw json.RawMessage) (string, []json.RawMessage, *wire.Error) {
	var id string
	if json.Unmarshal(raw, &id) != nil {
		var o struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &o) != nil || o.ID == "" {
			return "", nil, wire.Invalid("conversation", "'conversation' must be a conversation id or an object with its id")
		}
		id = o.ID
	}
	c, e := s.conversation(ctx, tenant, id)
	if e != nil {
		e.Param = "conversation"
		return "", nil, e
	}
	if c.Bytes > s.MaxBody {
		// What a request may carry in its body bounds what it may carry from its
		// conversation: the whole is the job's request.
		return "", nil, wire.Invalid("conversation", "The conversation's items take %d bytes; a request may run on at most %d. Start a new conversation, or delete items from this one.", c.Bytes, s.MaxBody)
	}
	items, err := s.Store.Conversations.ConversationItems(ctx, c.ID)
	if err != nil {
		return "", nil, unavailable("Reading the conversation")
	}
	return c.ID, itemsOf(items), nil
}

// addTurn adds a completed stored response's turn to the conversation it names: the
// request's own input items, each with an id (wire.InputItemID for one sent without),
// then its output items. It is added once, however often it is called.
func (s *Server) addTurn(ctx context.Context, job *state.Job, rec *state.StoredResponse) {
	if rec == nil || rec.Conversation == "" || job.Status != state.Completed {
		return
	}
	output, e := outputItems(job, rec)
	if e != nil {
		return
	}
	input, _ := ownInput(job.ID, rec)
	items := make([]state.ConversationItem, 0, len(input)+len(output))
	for _, it := range append(input, output...) {
		items = append(items, state.ConversationItem{ID: itemID(it), Item: it})
	}
	_, bytes, err := s.Store.Conversations.AddConversationItems(ctx, rec.Conversation, job.ID, items)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return // deleted meanwhile
	case err != nil:
		s.Log.Warn("api: adding a response's turn to its conversation", "response", job.ID, "conversation", rec.Conversation, "err", err)
		return
	}
	s.settleConversation(ctx, rec.Tenant, rec.Conversation, bytes)
}

// conversationTurn is the finish hook's part for a stored response that names a
// conversation: its turn is added (addTurn) if the ingress that answered it has not.
func (s *Server) conversationTurn(ctx context.Context, job *state.Job) error {
	if !job.HasStoredResponse || job.Status != state.Completed {
		return nil
	}
	conv, err := s.Store.Jobs.ResponseConversation(ctx, job.ID)
	if err != nil || conv == "" {
		return err
	}
	rec, err := s.Store.Jobs.GetResponse(ctx, job.ID)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.addTurn(ctx, job, rec)
	return nil
}
