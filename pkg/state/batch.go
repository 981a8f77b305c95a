package state

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The batch statuses of the OpenAI Batch API. A batch moves validating → in_progress →
// finalizing → completed (or expired, when its completion window ends first), or
// cancelling → cancelled; failed means it could not run at all. The scripts below
// move a batch between them; pkg/batch decides when.
const (
	BatchValidating = "validating"
	BatchFailed     = "failed"
	BatchInProgress = "in_progress"
	BatchFinalizing = "finalizing"
	BatchCompleted  = "completed"
	BatchExpired    = "expired"
	BatchCancelling = "cancelling"
	BatchCancelled  = "cancelled"
)

// How a batch line's job ended, as recorded in the batch's done hash (Keys.BatchDone).
const (
	LineCompleted = "c"
	LineFailed    = "f"
	LineCancelled = "x"
	LineExpired   = "e"
)

// BatchError is one problem of a batch's input (or why the batch failed), in the shape
// of the batch object's errors.data entries: a code, a message naming the line, the
// parameter at fault and the line number (1-based; nil for the input as a whole).
type BatchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// Batch is a batch as stored (the Keys.Batch hash). Times are stored as Unix
// milliseconds; a zero time is an absent field.
type Batch struct {
	ID          string
	Tenant      string
	Status      string
	Endpoint    string
	InputFileID string
	// Window is the completion window as the client gave it ("24h").
	Window string
	// Model is the model of the batch's lines (the first line's, for a file).
	Model    string
	Metadata map[string]string
	// Callback is the stored callback (what the webhook service returned), if any.
	Callback json.RawMessage
	Errors   []BatchError

	Created, Expires                                  time.Time
	InProgressAt, FinalizingAt, CompletedAt, FailedAt time.Time
	ExpiredAt, CancellingAt, CancelledAt              time.Time
	// ProgressAt is the last time a line was counted or expanded (for stall repair).
	ProgressAt time.Time

	// Total is the number of lines; Completed and Failed count ended jobs; Ended
	// counts every line with an outcome (cancelled and expired included).
	Total, Completed, Failed, Ended int
	// Expanded is how many lines have their job created and published (the
	// expansion's cursor); ExpandDone is set when expansion has stopped, after the
	// last line or cut short by a cancel or the window's end.
	Expanded   int
	ExpandDone bool

	OutputFileID, ErrorFileID string
	// Webhook is the callback delivery's state: "" (none yet), "pending" (queued),
	// "skipped" (the callback did not ask for this status), or what the webhook
	// service recorded ("delivered", "failed", "disabled").
	Webhook string
}

// Resolved reports whether every line that will ever have a job has an outcome: the
// batch can be finalized. (count_line.lua and advance_cursor.lua make the same test.)
func (b *Batch) Resolved() bool { return b.ExpandDone && b.Ended >= b.Expanded }

// fields returns the hash fields of a new batch.
func (b *Batch) fields() []any {
	meta, _ := json.Marshal(b.Metadata)
	f := []any{"id", b.ID, "tenant", b.Tenant, "status", b.Status, "endpoint", b.Endpoint,
		"input_file_id", b.InputFileID, "window", b.Window, "model", b.Model, "metadata", meta,
		"created", Millis(b.Created), "expires", Millis(b.Expires), "progress_at", Millis(b.Created),
		"total", b.Total, "completed", 0, "failed", 0, "ended", 0, "expanded", 0, "expand_done", 0}
	if len(b.Callback) > 0 {
		f = append(f, "callback", []byte(b.Callback))
	}
	return f
}

// batchFromHash reads a stored batch.
func batchFromHash(m map[string]string) *Batch {
	num := func(k string) int { n, _ := strconv.Atoi(m[k]); return n }
	b := &Batch{
		ID: m["id"], Tenant: m["tenant"], Status: m["status"], Endpoint: m["endpoint"], InputFileID: m["input_file_id"],
		Window: m["window"], Model: m["model"],
		Created: FromMillis(m["created"]), Expires: FromMillis(m["expires"]), InProgressAt: FromMillis(m["in_progress_at"]),
		FinalizingAt: FromMillis(m["finalizing_at"]), CompletedAt: FromMillis(m["completed_at"]), FailedAt: FromMillis(m["failed_at"]),
		ExpiredAt: FromMillis(m["expired_at"]), CancellingAt: FromMillis(m["cancelling_at"]), CancelledAt: FromMillis(m["cancelled_at"]),
		ProgressAt: FromMillis(m["progress_at"]),
		Total:      num("total"), Completed: num("completed"), Failed: num("failed"), Ended: num("ended"),
		Expanded: num("expanded"), ExpandDone: m["expand_done"] == "1",
		OutputFileID: m["output_file_id"], ErrorFileID: m["error_file_id"], Webhook: m["webhook"],
	}
	if v := m["metadata"]; v != "" && v != "null" {
		json.Unmarshal([]byte(v), &b.Metadata)
	}
	if v := m["callback"]; v != "" {
		b.Callback = json.RawMessage(v)
	}
	if v := m["errors"]; v != "" {
		json.Unmarshal([]byte(v), &b.Errors)
	}
	return b
}

// CreateBatch records a new batch, its custom_ids (customIDs[i] is line i's) and its
// place in the tenant's list and in the active set, in one round trip. Its keys live
// until the completion window ends plus the store's retention; a batch that ends keeps
// them for the retention.
func (s *Batches) CreateBatch(ctx context.Context, b *Batch, customIDs []string) error {
	ttl := time.Until(b.Expires) + s.Retention
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.K.Batch(b.ID), b.fields()...)
		for start := 0; start < len(customIDs); start += 1000 {
			end := min(start+1000, len(customIDs))
			args := make([]any, 0, 2*(end-start))
			for i := start; i < end; i++ {
				args = append(args, strconv.Itoa(i), customIDs[i])
			}
			p.HSet(ctx, s.K.BatchIDs(b.ID), args...)
		}
		p.PExpire(ctx, s.K.Batch(b.ID), ttl)
		p.PExpire(ctx, s.K.BatchIDs(b.ID), ttl)
		p.ZAdd(ctx, s.K.TenantBatches(b.Tenant), redis.Z{Score: float64(b.Created.UnixMilli()), Member: b.ID})
		p.SAdd(ctx, s.K.ActiveBatches(), b.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: recording batch %s: %w", b.ID, err)
	}
	return nil
}

// GetBatch reads a batch; ErrNotFound when there is none (or it expired).
func (s *Batches) GetBatch(ctx context.Context, id string) (*Batch, error) {
	m, err := s.r.HGetAll(ctx, s.K.Batch(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading batch %s: %w", id, err)
	}
	if len(m) == 0 || m["id"] == "" {
		return nil, ErrNotFound
	}
	return batchFromHash(m), nil
}

// BatchStatus reads only a batch's status ("" when there is no such batch).
func (s *Batches) BatchStatus(ctx context.Context, id string) (string, error) {
	st, err := s.r.HGet(ctx, s.K.Batch(id), "status").Result()
	if err == redis.Nil {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("state: reading batch %s status: %w", id, err)
	}
	return st, nil
}

// BatchOutcomes reads how each of a batch's lines with an outcome ended (Line*), by
// line index.
func (s *Batches) BatchOutcomes(ctx context.Context, id string) (map[int]string, error) {
	return s.batchIndexHash(ctx, s.K.BatchDone(id))
}

// BatchCustomIDs reads the custom_id of each of a batch's lines, by line index.
func (s *Batches) BatchCustomIDs(ctx context.Context, id string) (map[int]string, error) {
	return s.batchIndexHash(ctx, s.K.BatchIDs(id))
}

func (s *core) batchIndexHash(ctx context.Context, key string) (map[int]string, error) {
	m, err := s.r.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading %s: %w", key, err)
	}
	out := make(map[int]string, len(m))
	for k, v := range m {
		if i, err := strconv.Atoi(k); err == nil {
			out[i] = v
		}
	}
	return out, nil
}

// countLine records how a batch line ended, once: the first call counts it, every
// later one changes nothing. (lua/count_line.lua)
var countLine = script("count_line")

// CountBatchLine records how line i of a batch ended (a Line* outcome) once: the
// first call counts it, every later one changes nothing. It reports whether that
// call resolved the batch (see Batch.Resolved), which then moved to finalizing;
// only the call that counted reports it, so one finished job asks for
// finalization once.
func (s *Batches) CountBatchLine(ctx context.Context, id string, i int, outcome string) (resolved bool, err error) {
	v, err := countLine.Run(ctx, s.r, []string{s.K.Batch(id), s.K.BatchDone(id)}, i, outcome, Millis(time.Now())).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("state: batch %s: counting line %d: %w", id, i, err)
	}
	return len(v) == 2 && v[1] == 1, nil
}

// advanceCursor records that a batch's lines below cursor are expanded and, when done
// is "1", that expansion has stopped; a validating batch becomes in_progress.
// (lua/advance_cursor.lua)
var advanceCursor = script("advance_cursor")

// AdvanceBatch moves a batch's expansion cursor to cursor (it never moves back) and,
// when done, marks its expansion stopped; a validating batch becomes in_progress. It
// reports whether the batch is now resolved (and so finalizing).
func (s *Batches) AdvanceBatch(ctx context.Context, id string, cursor int, done bool) (resolved bool, err error) {
	d := "0"
	if done {
		d = "1"
	}
	n, err := advanceCursor.Run(ctx, s.r, []string{s.K.Batch(id)}, cursor, d, Millis(time.Now())).Int()
	if err != nil {
		return false, fmt.Errorf("state: batch %s: moving the cursor: %w", id, err)
	}
	return n == 1, nil
}

// requestCancel moves a batch that has not ended (and is not finalizing) to
// cancelling. (lua/request_cancel.lua)
var requestCancel = script("request_cancel")

// CancelBatch moves a batch that is validating or in progress to cancelling, and
// returns its status after the call ("" when there is no such batch).
func (s *Batches) CancelBatch(ctx context.Context, id string) (string, error) {
	st, err := requestCancel.Run(ctx, s.r, []string{s.K.Batch(id)}, Millis(time.Now())).Text()
	if err != nil {
		return "", fmt.Errorf("state: cancelling batch %s: %w", id, err)
	}
	return st, nil
}

// finishBatch gives a batch its final status unless it has one. (lua/finish_batch.lua)
var finishBatch = script("finish_batch")

// BatchEnd is what a batch ends with besides its status: its output and error files
// (finalization), or why it failed.
type BatchEnd struct {
	OutputFileID, ErrorFileID string
	Errors                    []BatchError
}

// FinishBatch gives a batch its final status (completed, failed, expired or
// cancelled, with its <status>_at time) and what it ended with, unless it has a final
// status already, and reports whether it did. The batch leaves the active set, and
// its keys expire after the store's retention.
func (s *Batches) FinishBatch(ctx context.Context, id, status string, end BatchEnd) (bool, error) {
	argv := []any{status, status + "_at", Millis(time.Now()), s.Retention.Milliseconds()}
	if end.OutputFileID != "" || end.ErrorFileID != "" {
		argv = append(argv, "output_file_id", end.OutputFileID, "error_file_id", end.ErrorFileID)
	}
	if len(end.Errors) > 0 {
		errs, err := json.Marshal(end.Errors)
		if err != nil {
			return false, err
		}
		argv = append(argv, "errors", errs)
	}
	n, err := finishBatch.Run(ctx, s.r, []string{s.K.Batch(id), s.K.BatchDone(id), s.K.BatchIDs(id), s.K.batchSearchRecord(id)}, argv...).Int()
	if err != nil {
		return false, fmt.Errorf("state: finishing batch %s: %w", id, err)
	}
	if n == 1 {
		s.r.SRem(ctx, s.K.ActiveBatches(), id)
	}
	return n == 1, nil
}

// SetBatchWebhook moves a batch's callback delivery state ("pending", "skipped",
// "delivered", "failed", "disabled") to "to" if it is now one of from (any state when
// from is empty), atomically, as SetWebhookStatus does for a job: a delivery that
// settles before the finalizer has recorded "pending" is not overwritten by it. A
// batch that is gone is left gone.
func (s *Webhooks) SetBatchWebhook(ctx context.Context, id, to string, from ...string) error {
	argv := make([]any, 0, 1+len(from))
	argv = append(argv, to)
	for _, f := range from {
		argv = append(argv, f)
	}
	if err := setWebhookStatus.Run(ctx, s.r, []string{s.K.Batch(id)}, argv...).Err(); err != nil {
		return fmt.Errorf("state: setting batch webhook status: %w", err)
	}
	return nil
}

// ActiveBatches lists the batches that have not ended.
func (s *Batches) ActiveBatches(ctx context.Context) ([]string, error) {
	return s.r.SMembers(ctx, s.K.ActiveBatches()).Result()
}

// ForgetActiveBatch drops a batch from the active set (its record expired).
func (s *Batches) ForgetActiveBatch(ctx context.Context, id string) error {
	return s.r.SRem(ctx, s.K.ActiveBatches(), id).Err()
}

// ForgetTenantBatch drops a batch from its tenant's list (its record expired).
func (s *Batches) ForgetTenantBatch(ctx context.Context, tenant, id string) error {
	return s.r.ZRem(ctx, s.K.TenantBatches(tenant), id).Err()
}
