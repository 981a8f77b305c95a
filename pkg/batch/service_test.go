package batch

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats.go"

	"github.com/searchfleet/searchfleet/internal/testkit/redistest"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// harness is a batch service on a real NATS server and the Redis store over miniredis
// (redistest), with no chat workers: tests end the jobs themselves and drive the batch
// by calling HandleExpand, and move a batch's clock by editing its record.
type harness struct {
	t     *testing.T
	s     *Service
	store *state.Store         // the service's store
	redis *miniredis.Miniredis // under it, to edit a batch's record
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	b, _ := bustest.New(t)
	store, mr := redistest.New(t)
	hooks := &webhook.Service{Bus: b, Store: store.Webhooks, Config: webhook.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	s := &Service{Bus: b, Store: StoreOf(store), Webhooks: hooks, Ender: jobs.NewEnder(store.Jobs, b, nil, nil), Models: []string{"m1"}, Log: slog.New(slog.DiscardHandler)}
	return &harness{t: t, s: s, store: store, redis: mr}
}

// tenant is the tenant the harness's batches belong to.
const tenant = "default"

// asJSON is a view as the API answers it.
func asJSON(v View) []byte {
	b, _ := json.Marshal(v)
	return b
}

// create makes a batch of n questions (with extra fields) and returns its id.
func (h *harness) create(n int, extra map[string]any) string {
	h.t.Helper()
	var qs []string
	for i := range n {
		qs = append(qs, "question "+string(rune('a'+i)))
	}
	body := map[string]any{"queries": qs, "model": "m1"}
	for k, v := range extra {
		body[k] = v
	}
	raw, _ := json.Marshal(body)
	var p CreateParams
	if err := json.Unmarshal(raw, &p); err != nil {
		h.t.Fatal(err)
	}
	v, err := h.s.Create(h.t.Context(), tenant, &p)
	if err != nil {
		h.t.Fatalf("create: %v", err)
	}
	return v.ID
}

// drive handles one expand message for the batch.
func (h *harness) drive(id string) {
	h.t.Helper()
	if err := h.s.HandleExpand(h.t.Context(), &bus.Delivery[bus.BatchExpand]{Msg: bus.BatchExpand{BatchID: id}, Attempt: 1, MaxDeliver: 10}); err != nil {
		h.t.Fatalf("HandleExpand: %v", err)
	}
}

func (h *harness) record(id string) *record {
	h.t.Helper()
	b, err := h.s.Store.GetBatch(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// end ends line i's job as a chat worker would (completed, or failed with code) and
// reports it twice, as a redelivered final step may.
func (h *harness) end(id string, i int, code string) {
	h.t.Helper()
	ctx, jid := h.t.Context(), jobID(id, i)
	var err error
	if code == "" {
		_, err = h.store.Jobs.Finish(ctx, jid, state.Completed, "response", storedAnswer(h.t))
	} else {
		_, err = h.store.Jobs.Finish(ctx, jid, state.Failed, "error", &state.JobError{Status: 502, Type: "upstream_error", Code: code, Message: "it broke"})
	}
	if err != nil {
		h.t.Fatal(err)
	}
	job, err := h.store.Jobs.GetJob(ctx, jid)
	if err != nil {
		h.t.Fatal(err)
	}
	h.s.JobFinished(ctx, job)
	h.s.JobFinished(ctx, job)
}

// storedAnswer is a completed job's answer as the chat worker stores it.
func storedAnswer(t testing.TB) json.RawMessage {
	t.Helper()
	b, err := wire.EncodeAnswer(&wire.Response{Model: "m1", Status: wire.StatusCompleted, Stop: wire.StopEndTurn,
		Content: []wire.Part{{Kind: wire.PartText, Text: "Done."}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lines reads a stored file's JSONL lines.
func (h *harness) lines(fileID string) []outputLine {
	h.t.Helper()
	if fileID == "" {
		return nil
	}
	rc, err := h.s.OpenFile(h.t.Context(), fileID)
	if err != nil {
		h.t.Fatalf("content of %s: %v", fileID, err)
	}
	defer rc.Close()
	body, err := io.ReadAll(rc)
	if err != nil {
		h.t.Fatalf("content of %s: %v", fileID, err)
	}
	var out []outputLine
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var o outputLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			h.t.Fatalf("%v: %s", err, l)
		}
		out = append(out, o)
	}
	return out
}

// lastMsg returns the last message on a subject and its Nats-Msg-Id.
func (h *harness) lastMsg(stream, subject string) ([]byte, string) {
	h.t.Helper()
	st, err := h.s.Bus.RawJetStream().Stream(h.t.Context(), stream)
	if err != nil {
		h.t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(h.t.Context(), subject)
	if err != nil {
		return nil, ""
	}
	return m.Data, m.Header.Get(nats.MsgIdHdr)
}

// expire ends a batch's completion window (its record's expiry moves a second back;
// its keys keep their lifetime).
func (h *harness) expire(id string) {
	h.t.Helper()
	h.editBatch(id, "expires", time.Now().Add(-time.Second))
}

// editBatch sets a time field of a batch's stored record.
func (h *harness) editBatch(id, field string, at time.Time) {
	h.t.Helper()
	k := h.store.K.Batch(id)
	if !h.redis.Exists(k) {
		h.t.Fatalf("no batch %s", id)
	}
	h.redis.HSet(k, field, state.Millis(at))
}

// Each line is counted once however often its job's end is reported; the last one
// asks for finalization, which writes the files in input order, ends the batch and
// enqueues its webhook once.
func TestLinesCountedOnceAndFinalized(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.create(3, map[string]any{"callback": map[string]any{"url": "http://127.0.0.1:9/hook"}})
	h.drive(id)
	b := h.record(id)
	if b.Status != state.BatchInProgress || b.Expanded != 3 || !b.ExpandDone || b.InProgressAt.IsZero() {
		t.Fatalf("after expansion %+v", b)
	}
	for i := range 3 {
		job, err := h.store.Jobs.GetJob(t.Context(), jobID(id, i))
		if err != nil || job.Batch != id || job.Status != state.Queued || !job.Deadline.Equal(b.Expires) {
			t.Fatalf("job %d: %+v %v", i, job, err)
		}
	}
	h.drive(id) // a redelivered expansion creates nothing new
	h.end(id, 2, "boom")
	h.end(id, 0, "")
	if _, msgID := h.lastMsg(bus.StreamJobs, bus.SubjectExpand); strings.HasSuffix(msgID, ":finalize") {
		t.Fatal("finalization asked for before the last line")
	}
	h.end(id, 1, "")
	b = h.record(id)
	if b.Status != state.BatchFinalizing || b.Completed != 2 || b.Failed != 1 || b.Ended != 3 {
		t.Fatalf("after the last line %+v", b)
	}
	if _, msgID := h.lastMsg(bus.StreamJobs, bus.SubjectExpand); msgID != "expand:"+id+":finalize" {
		t.Fatalf("last expand message %q, want the finalize kick", msgID)
	}
	h.drive(id)
	b = h.record(id)
	if b.Status != state.BatchCompleted || b.CompletedAt.IsZero() || b.Webhook != "pending" {
		t.Fatalf("finalized %+v", b)
	}
	out, errs := h.lines(b.OutputFileID), h.lines(b.ErrorFileID)
	if len(out) != 2 || out[0].CustomID != "q-1" || out[1].CustomID != "q-2" || out[0].Response.RequestID != jobID(id, 0) {
		t.Errorf("output %+v", out)
	}
	if len(errs) != 1 || errs[0].CustomID != "q-3" || errs[0].Error.Code != "boom" || errs[0].Response != nil {
		t.Errorf("errors %+v", errs)
	}
	data, msgID := h.lastMsg(bus.StreamWebhooks, bus.SubjectWebhook)
	d, _, err := bus.Decode[bus.WebhookDelivery](data)
	if err != nil || msgID != "wh:msg_"+id+"_completed" || d.Event != "batch.completed" || d.BatchID != id || d.URL != "http://127.0.0.1:9/hook" {
		t.Fatalf("webhook %+v %q %v", d, msgID, err)
	}
	var p struct {
		Type string `json:"type"`
		Data View   `json:"data"`
	}
	json.Unmarshal(d.Payload, &p)
	if p.Type != "batch.completed" || p.Data.ID != id || p.Data.Status != state.BatchCompleted || p.Data.RequestCounts.Completed != 2 {
		t.Errorf("payload %s", d.Payload)
	}
	h.drive(id) // done: nothing changes, no second delivery
	st, _ := h.s.Bus.RawJetStream().Stream(t.Context(), bus.StreamWebhooks)
	if info, _ := st.Info(t.Context()); info.State.Msgs != 1 {
		t.Errorf("%d webhook deliveries, want 1", info.State.Msgs)
	}
}

// When the completion window ends, the unfinished jobs fail as expired, the batch
// ends expired, and the lines that never ran are in the error file.
func TestExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.create(4, nil)
	h.drive(id)
	h.end(id, 0, "")
	h.expire(id)
	h.drive(id)
	b := h.record(id)
	if b.Status != state.BatchExpired || b.ExpiredAt.IsZero() || b.Completed != 1 || b.Failed != 0 {
		t.Fatalf("expired batch %+v", b)
	}
	if out := h.lines(b.OutputFileID); len(out) != 1 || out[0].CustomID != "q-1" {
		t.Errorf("output %+v", out)
	}
	errs := h.lines(b.ErrorFileID)
	if len(errs) != 3 || errs[0].Error.Code != "batch_expired" {
		t.Errorf("errors %+v", errs)
	}
	job, _ := h.store.Jobs.GetJob(t.Context(), jobID(id, 3))
	if job.Status != state.Failed || job.Error.Code != "batch_expired" {
		t.Errorf("unfinished job %+v", job)
	}

	id = h.create(2, nil)
	h.expire(id)
	h.drive(id)
	b = h.record(id)
	if b.Status != state.BatchExpired || b.Expanded != 0 || b.OutputFileID != "" || len(h.lines(b.ErrorFileID)) != 2 {
		t.Fatalf("batch expired before it ran %+v", b)
	}
	if _, err := h.store.Jobs.GetJob(t.Context(), jobID(id, 0)); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("a job was created after the window: %v", err)
	}
}

// A batch cancelled before its expansion ran creates no job and ends cancelled
// with every line in the error file; cancelling an ended batch is refused.
func TestCancelBeforeExpansion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.create(3, nil)
	if v, err := h.s.Cancel(t.Context(), tenant, id); err != nil || !strings.Contains(string(asJSON(v)), `"cancelling"`) {
		t.Fatalf("cancel: %v %s", err, asJSON(v))
	}
	h.drive(id)
	b := h.record(id)
	if b.Status != state.BatchCancelled || b.CancelledAt.IsZero() || b.CancellingAt.IsZero() || b.Expanded != 0 {
		t.Fatalf("cancelled %+v", b)
	}
	errs := h.lines(b.ErrorFileID)
	if len(errs) != 3 || errs[2].CustomID != "q-3" || errs[2].Error.Code != "batch_cancelled" {
		t.Errorf("errors %+v", errs)
	}
	id = h.create(1, nil)
	h.drive(id)
	h.end(id, 0, "")
	h.drive(id)
	if v, err := h.s.Cancel(t.Context(), tenant, id); !isKind(err, Conflict) {
		t.Errorf("cancelling a completed batch: %v %s", err, asJSON(v))
	}
}

// A job whose end was never counted (its worker died between the two) is found when
// the stalled batch is looked at: GET asks for a repair, which counts it.
func TestStalledBatchRepaired(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.create(2, nil)
	h.drive(id)
	h.end(id, 0, "")
	if _, err := h.store.Jobs.Finish(t.Context(), jobID(id, 1), state.Completed, false, "response", storedAnswer(t)); err != nil {
		t.Fatal(err)
	}
	h.editBatch(id, "progress_at", time.Now().Add(-time.Minute))
	if _, err := h.s.Get(t.Context(), tenant, id); err != nil {
		t.Fatal(err)
	}
	if _, msgID := h.lastMsg(bus.StreamJobs, bus.SubjectExpand); !strings.HasPrefix(msgID, "expand:"+id+":repair-") {
		t.Fatalf("last expand message %q, want a repair", msgID)
	}
	h.drive(id)
	if b := h.record(id); b.Status != state.BatchCompleted || b.Completed != 2 {
		t.Fatalf("repaired batch %+v", b)
	}
}

// While one process drives a batch, another's message waits for the lease.
func TestLeaseSerializesDrivers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.create(1, nil)
	release, _, err := h.store.Batches.HoldBatch(t.Context(), id, "someone-else", 5*time.Second)
	if err != nil || release == nil {
		t.Fatal(release != nil, err)
	}
	defer release(true)
	err = h.s.HandleExpand(context.Background(), &bus.Delivery[bus.BatchExpand]{Msg: bus.BatchExpand{BatchID: id}, Attempt: 1, MaxDeliver: 10})
	if d := bus.Decide(err, 1, 10); d.Action != bus.Nak || d.Delay < 4*time.Second || d.Delay > 6*time.Second {
		t.Fatalf("decision %+v for %v", d, err)
	}
	if b := h.record(id); b.Expanded != 0 || b.Status != state.BatchValidating {
		t.Errorf("the batch moved without its lease: %+v", b)
	}
}

// An expansion that failed every delivery ends its batch failed, with the reason.
func TestExpansionDeadLettered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.create(2, nil)
	if err := h.s.DeadLettered(t.Context(), expandDeadLetter(t, id, "redis down")); err != nil {
		t.Fatal(err)
	}
	b := h.record(id)
	if b.Status != state.BatchFailed || b.FailedAt.IsZero() || len(b.Errors) != 1 || b.Errors[0].Code != "expansion_failed" || !strings.Contains(b.Errors[0].Message, "redis down") {
		t.Fatalf("dead-lettered batch %+v", b)
	}
	v, err := h.s.Get(t.Context(), tenant, id)
	if body := asJSON(v); err != nil || !strings.Contains(string(body), `"errors":{"object":"list","data":[{"code":"expansion_failed"`) {
		t.Errorf("GET: %v %s", err, body)
	}
}

// A message that spent its deliveries waiting while another process drove the batch
// fails nothing: the driver is still expanding it. Once no one drives it, a dead
// letter ends it failed.
func TestExpansionDeadLetteredWhileDriven(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.create(2, nil)
	dl := expandDeadLetter(t, id, "retry after 15s: batch is being driven by another process")
	release, _, err := h.store.Batches.HoldBatch(t.Context(), id, "a-slow-driver", 5*time.Second)
	if err != nil || release == nil {
		t.Fatal(release != nil, err)
	}
	if err := h.s.DeadLettered(t.Context(), dl); err != nil {
		t.Fatal(err)
	}
	if b := h.record(id); b.Status == state.BatchFailed || b.ExpandDone {
		t.Fatalf("a batch being driven was failed by a dead-lettered kick: %+v", b)
	}
	release(true)
	if err := h.s.DeadLettered(t.Context(), dl); err != nil {
		t.Fatal(err)
	}
	if b := h.record(id); b.Status != state.BatchFailed {
		t.Fatalf("a batch no one drives, dead-lettered: %+v", b)
	}
}

// expandDeadLetter is the dead letter of batch id's expansion message after ten
// deliveries, with reason.
func expandDeadLetter(t *testing.T, id, reason string) bus.DeadLetter {
	t.Helper()
	m, err := bus.Encode(bus.SubjectExpand, bus.BatchExpand{BatchID: id})
	if err != nil {
		t.Fatal(err)
	}
	return bus.DeadLetter{MsgKind: bus.BatchExpand{}.Kind(), Reason: reason, Deliveries: 10, Data: m.Data}
}

// isKind reports whether err is an *Error of kind k.
func isKind(err error, k Kind) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Kind == k
}
