package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The batch statuses of the OpenAI Batch API. A batch moves validating → in_progress →
// finalizing → completed (or expired, when its completion window ends first), or
// cancelling → cancelled; failed means it could not run at all.
const (
	statusValidating = "validating"
	statusFailed     = "failed"
	statusInProgress = "in_progress"
	statusFinalizing = "finalizing"
	statusCompleted  = "completed"
	statusExpired    = "expired"
	statusCancelling = "cancelling"
	statusCancelled  = "cancelled"
)

// terminal reports whether a batch status is final.
func terminal(status string) bool {
	switch status {
	case statusCompleted, statusFailed, statusExpired, statusCancelled:
		return true
	}
	return false
}

// How a line's job ended, as recorded in the batch's done hash.
const (
	outcomeCompleted = "c"
	outcomeFailed    = "f"
	outcomeCancelled = "x"
	outcomeExpired   = "e"
)

// record is a batch as stored in Redis (the state.Keys.Batch hash). Times are stored as Unix
// milliseconds; a zero time is an absent field.
type record struct {
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
	Errors   []lineError

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

// fields returns the hash fields of a new record.
func (r *record) fields() []any {
	meta, _ := json.Marshal(r.Metadata)
	f := []any{"id", r.ID, "tenant", r.Tenant, "status", r.Status, "endpoint", r.Endpoint,
		"input_file_id", r.InputFileID, "window", r.Window, "model", r.Model, "metadata", meta,
		"created", state.Millis(r.Created), "expires", state.Millis(r.Expires), "progress_at", state.Millis(r.Created),
		"total", r.Total, "completed", 0, "failed", 0, "ended", 0, "expanded", 0, "expand_done", 0}
	if len(r.Callback) > 0 {
		f = append(f, "callback", []byte(r.Callback))
	}
	return f
}

// recordFromHash reads a stored record.
func recordFromHash(m map[string]string) *record {
	num := func(k string) int { n, _ := strconv.Atoi(m[k]); return n }
	r := &record{
		ID: m["id"], Tenant: m["tenant"], Status: m["status"], Endpoint: m["endpoint"], InputFileID: m["input_file_id"],
		Window: m["window"], Model: m["model"],
		Created: state.FromMillis(m["created"]), Expires: state.FromMillis(m["expires"]), InProgressAt: state.FromMillis(m["in_progress_at"]),
		FinalizingAt: state.FromMillis(m["finalizing_at"]), CompletedAt: state.FromMillis(m["completed_at"]), FailedAt: state.FromMillis(m["failed_at"]),
		ExpiredAt: state.FromMillis(m["expired_at"]), CancellingAt: state.FromMillis(m["cancelling_at"]), CancelledAt: state.FromMillis(m["cancelled_at"]),
		ProgressAt: state.FromMillis(m["progress_at"]),
		Total:      num("total"), Completed: num("completed"), Failed: num("failed"), Ended: num("ended"),
		Expanded: num("expanded"), ExpandDone: m["expand_done"] == "1",
		OutputFileID: m["output_file_id"], ErrorFileID: m["error_file_id"], Webhook: m["webhook"],
	}
	if v := m["metadata"]; v != "" && v != "null" {
		json.Unmarshal([]byte(v), &r.Metadata)
	}
	if v := m["callback"]; v != "" {
		r.Callback = json.RawMessage(v)
	}
	if v := m["errors"]; v != "" {
		json.Unmarshal([]byte(v), &r.Errors)
	}
	return r
}

// resolved reports whether every line that will ever have a job has an outcome:
// the batch can be finalized.
func (r *record) resolved() bool { return r.ExpandDone && r.Ended >= r.Expanded }

// jobID is the id of the job of line i: derived from the batch id, so a redelivered
// expansion finds the job it created before instead of creating another.
func jobID(batchID string, i int) string { return batchID + "_" + strconv.Itoa(i) }

// lineOf returns the line index of one of a batch's jobs.
func lineOf(batchID, jobID string) (int, bool) {
	if len(jobID) <= len(batchID)+1 || jobID[:len(batchID)] != batchID || jobID[len(batchID)] != '_' {
		return 0, false
	}
	n, err := strconv.Atoi(jobID[len(batchID)+1:])
	return n, err == nil && n >= 0
}

// errNoBatch means there is no such batch (or it expired from Redis).
var errNoBatch = errors.New("batch: not found")

// load reads a batch record.
func (s *Service) load(ctx context.Context, id string) (*record, error) {
	m, err := s.Store.R.HGetAll(ctx, s.Store.K.Batch(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("batch: reading %s: %w", id, err)
	}
	if len(m) == 0 || m["id"] == "" {
		return nil, errNoBatch
	}
	return recordFromHash(m), nil
}

// key builds one of this package's Redis keys under the store's prefix.

// resolvedLua is the tail of the scripts that change a batch's progress: when every
// line with a job has an outcome, an in-progress batch moves to finalizing, and the
// script answers 1 (the caller makes sure the batch is finalized). KEYS[1] is the
// batch record; now is the time in ms.
const resolvedLua = `
local function resolved(now)
  if redis.call('HGET', KEYS[1], 'expand_done') ~= '1' then return 0 end
  local ended = tonumber(redis.call('HGET', KEYS[1], 'ended') or '0')
  local expanded = tonumber(redis.call('HGET', KEYS[1], 'expanded') or '0')
  if ended < expanded then return 0 end
  local st = redis.call('HGET', KEYS[1], 'status')
  if st == 'in_progress' or st == 'validating' then
    redis.call('HSET', KEYS[1], 'status', 'finalizing', 'finalizing_at', now)
    return 1
  end
  if st == 'finalizing' or st == 'cancelling' then return 1 end
  return 0
end
`

// countLine records how line ARGV[1] ended (ARGV[2], an outcome) once: the first
// call counts it, every later one changes nothing. KEYS[1] batch, KEYS[2] done;
// ARGV[3] now (ms). Returns {counted, resolved}; resolved is only reported by the
// call that counted, so one finished job asks for finalization once. The done hash
// expires with the batch record.
var countLine = redis.NewScript(resolvedLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return {0, 0} end
if redis.call('HINCRBY', KEYS[1], 'ended', 1) == 1 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
if ARGV[2] == 'c' then redis.call('HINCRBY', KEYS[1], 'completed', 1)
elseif ARGV[2] == 'f' then redis.call('HINCRBY', KEYS[1], 'failed', 1) end
redis.call('HSET', KEYS[1], 'progress_at', ARGV[3])
return {1, resolved(ARGV[3])}
`)

// advanceCursor records that lines below ARGV[1] are expanded and, when ARGV[2] is
// "1", that expansion has stopped. A validating batch becomes in_progress. KEYS[1]
// batch; ARGV[3] now (ms). Returns resolved (see resolvedLua).
var advanceCursor = redis.NewScript(resolvedLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'status') == 'validating' then
  redis.call('HSET', KEYS[1], 'status', 'in_progress', 'in_progress_at', ARGV[3])
end
local cur = tonumber(redis.call('HGET', KEYS[1], 'expanded') or '0')
if tonumber(ARGV[1]) > cur then redis.call('HSET', KEYS[1], 'expanded', ARGV[1]) end
redis.call('HSET', KEYS[1], 'progress_at', ARGV[3])
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'expand_done', '1')
  return resolved(ARGV[3])
end
return 0
`)

// requestCancel moves a batch that has not ended (and is not finalizing) to
// cancelling. KEYS[1] batch; ARGV[1] now (ms). Returns the status after.
var requestCancel = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return '' end
if st == 'validating' or st == 'in_progress' then
  redis.call('HSET', KEYS[1], 'status', 'cancelling', 'cancelling_at', ARGV[1], 'progress_at', ARGV[1])
  return 'cancelling'
end
return st
`)

// finishBatch gives a batch its final status unless it has one: ARGV[1] status,
// ARGV[2] the timestamp field to set, ARGV[3] now (ms), ARGV[4] ttl (ms), then
// field/value pairs. KEYS[1] batch, KEYS[2] done, KEYS[3] ids. Returns 1 if it moved
// the batch. The batch's keys then expire after ttl.
var finishBatch = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st or st == 'completed' or st == 'failed' or st == 'expired' or st == 'cancelled' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], ARGV[2], ARGV[3], 'progress_at', ARGV[3])
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1]) end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
return 1
`)
