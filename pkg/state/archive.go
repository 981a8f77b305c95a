package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Hot and cold. While a job runs, Redis holds all of it: the record (request,
// status, answer once there is one) with, in the same hash, the chain (every hop's
// model turn, calls and results), the recorded searches and the calls' outcomes;
// the spend ledger and the stored Responses object beside it. When the job has
// ended, ArchiveJob (run by the first finish hook, from the job's terminal event)
// writes what must be kept for the retention period — the record as it stands, the
// chain, the recorded searches, the stored response — as one value to the Archive (a
// JetStream key-value bucket, bus.Records), then, in one script, drops the cold parts
// from Redis: the record keeps its short fields (status, tenant, kind, model, times,
// batch, webhook status, replay_of), notes the archived bytes ("cold") and holds a
// summary of what listings show (question, searches and cost, error), well under a
// kilobyte; the chain, the recorded searches, the stored response, the job's spend
// ledger (not archived: the record's usage keeps the job's cost; the trim reads it
// and the job is counted in its tenant's spend per model then, once) and the calls'
// outcomes and fallback state are deleted.
//
// Readers find a job wherever it is: GetJob, RecordedSearches and GetResponse read
// Redis first, and the archive for what Redis no longer holds — the cold part of an
// archived job, or the whole of a job Redis lost (a restart with an empty dataset).
//
// Writing is exactly once under redelivery: the archive keeps the first value of a
// key, and the trim happens only once the value is written, so a finish hook that
// dies between the two writes it again (the same value, a no-op) and trims.

// Archive is where ended jobs' records are kept for the retention period, off Redis.
// bus.Records implements it.
type Archive interface {
	// Put stores value under key unless key holds a value already.
	Put(ctx context.Context, key string, value []byte) error
	// Get reads the value under key; nil, nil when there is none (or it expired).
	Get(ctx context.Context, key string) ([]byte, error)
}

// WithArchive keeps ended jobs' records in a rather than in Redis (see ArchiveJob).
func WithArchive(a Archive) Option { return func(s *core) { s.archive = a } }

// fieldCold is the job hash field of an archived job: the bytes its archived record
// holds.
const fieldCold = "cold"

// coldFields are the job hash fields that move to the archive: the large ones, and
// those longer than Redis's compact hash encoding allows (64 bytes by default; a hash
// holding one longer value takes four times the memory). Listings read the question,
// usage and error of an archived job from its summary (summaryFields).
var coldFields = []any{"request", "response", "trace", "callback", "usage", "error", "question"}

// An archived job's summary (jobSummary, JSON) is kept in its trimmed hash, in
// pieces of at most summaryPiece bytes, fields "sum.0", "sum.1" and on: one value
// longer than Redis's compact hash encoding allows (hash-max-listpack-value, 64 bytes
// by default) would double the record's memory, and a question alone may be 200
// characters. In pieces, the record stays one compact key
// (TestArchivedJobKeepsItsSummaryCompact). No other field of a job's hash begins
// "sum.".
const (
	prefixSummary = "sum."
	summaryPiece  = 63
)

// summaryFields are the field/value pairs that keep summary b in a job's hash.
func summaryFields(b []byte) []any {
	var f []any
	for i := 0; len(b) > 0; i++ {
		n := min(len(b), summaryPiece)
		f = append(f, prefixSummary+strconv.Itoa(i), b[:n])
		b = b[n:]
	}
	return f
}

// summaryOf joins the summary kept in the job hash m (summaryFields): "" when there
// is none (a job not archived).
func summaryOf(m map[string]string) string {
	var b strings.Builder
	for i := 0; ; i++ {
		v, ok := m[prefixSummary+strconv.Itoa(i)]
		if !ok {
			return b.String()
		}
		b.WriteString(v)
	}
}

// jobSummary is an archived job's summary (summaryFields): what a listing shows.
type jobSummary struct {
	Question string    `json:"q,omitempty"`
	Usage    *sumUsage `json:"u,omitempty"`
	Error    *JobError `json:"e,omitempty"`
}

// sumUsage is the part of a job's usage a listing shows.
type sumUsage struct {
	Searches int     `json:"searches"`
	CostUSD  float64 `json:"cost_usd"`
}

// summaryErrorChars bounds an error message a summary keeps.
const summaryErrorChars = 200

// summarize is the summary of the job hash m.
func summarize(m map[string]string) []byte {
	sum := jobSummary{Question: m["question"]}
	if v := m["usage"]; v != "" {
		var u sumUsage
		if json.Unmarshal([]byte(v), &u) == nil {
			sum.Usage = &u
		}
	}
	if j := jobFromHash(map[string]string{"error": m["error"]}); j.Error != nil {
		e := *j.Error
		if r := []rune(e.Message); len(r) > summaryErrorChars {
			e.Message = string(r[:summaryErrorChars]) + "…"
		}
		sum.Error = &e
	}
	// Not HTML-escaped: a question's "<" is one byte, not six, of a record kept in
	// Redis for the retention period.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(sum)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// withSummary sets on j, an archived job as Redis keeps it, what its summary (b,
// JSON) holds: its question, its searches and cost as its usage, and its error.
func withSummary(j *Job, b string) {
	var sum jobSummary
	if json.Unmarshal([]byte(b), &sum) != nil {
		return
	}
	j.Question = sum.Question
	if sum.Usage != nil {
		j.Usage, _ = json.Marshal(sum.Usage)
	}
	if sum.Error != nil && j.Error == nil {
		j.Error = sum.Error
	}
}

// withCold sets on j, read from Redis, the fields its archived record (the job hash
// as it was archived) holds; a field Redis has (an error Settle wrote) stays.
func withCold(j *Job, cold map[string]string) {
	c := jobFromHash(cold)
	j.Request, j.Response, j.Trace, j.Callback, j.Usage, j.Question = c.Request, c.Response, c.Trace, c.Callback, c.Usage, c.Question
	if j.Error == nil {
		j.Error = c.Error
	}
}

// coldRecord is what the archive keeps of a job: its Redis hashes as they stood when
// it was archived, and its stored response.
type coldRecord struct {
	V        int             `json:"v"`
	Job      hashValues      `json:"job"`
	Chain    hashValues      `json:"chain,omitempty"`
	Searches hashValues      `json:"searches,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
}

// hashValues is a Redis hash in JSON: values that are JSON objects or arrays (most
// of them) are embedded as they are, any other as a string.
type hashValues map[string]string

// UnmarshalJSON reads a hash written by appendHash.
func (h *hashValues) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*h = make(hashValues, len(m))
	for k, v := range m {
		if len(v) > 0 && v[0] == '"' {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			(*h)[k] = s
			continue
		}
		(*h)[k] = string(v)
	}
	return nil
}

// encodeCold writes a job's archived record (a coldRecord), its hashes' fields in
// order (the same hashes always make the same bytes). The fleet wrote every value
// itself, so a field that holds JSON (jobJSONField, chainJSONField, every recorded
// search) is copied in as it is, neither validated nor compacted, and any other is
// written as a JSON string (encoding/json's, not HTML-escaped): each reads back as
// the bytes Redis held. response is the stored response (JSON, or nil).
func encodeCold(job, chain, searches map[string]string, response []byte) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	str := func(s string) {
		enc.Encode(s) // a string always encodes
		b.Truncate(b.Len() - 1)
	}
	hash := func(name string, h map[string]string, isJSON func(field string) bool) {
		b.WriteString(`,"` + name + `":{`)
		for i, k := range slices.Sorted(maps.Keys(h)) {
			if i > 0 {
				b.WriteByte(',')
			}
			str(k)
			b.WriteByte(':')
			if v := h[k]; v != "" && (v[0] == '{' || v[0] == '[') && isJSON(k) {
				b.WriteString(v)
			} else {
				str(v)
			}
		}
		b.WriteByte('}')
	}
	b.WriteString(`{"v":1`)
	hash("job", job, jobJSONField)
	if len(chain) > 0 {
		hash("chain", chain, chainJSONField)
	}
	if len(searches) > 0 {
		hash("searches", searches, func(string) bool { return true }) // results, as the workers encoded them
	}
	if len(response) > 0 {
		b.WriteString(`,"response":`)
		b.Write(response)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// jobJSONField reports whether a job hash field holds JSON the fleet encoded (the
// request in its stored form, the answer, usage, trace, webhook and error); the
// others (ids, status, times, the client's question and model name) are text, which
// may well begin with a bracket.
func jobJSONField(f string) bool {
	switch f {
	case "request", "response", "usage", "trace", "callback", "error":
		return true
	}
	return false
}

// chainJSONField reports whether a chain hash field holds JSON (a hop's model turn,
// its calls, a call's result); the counters and flags are text.
func chainJSONField(f string) bool {
	kind, _, _ := strings.Cut(f, ":")
	return kind == prefixTurn || kind == prefixCalls || kind == prefixResult
}

// trimJob drops an archived job's cold parts from Redis once, and counts its spend per
// model. (lua/trim_job.lua)
var trimJob = script("trim_job")

// ArchiveJob moves an ended job's record to the archive and drops its cold parts
// from Redis (see above). It reports the bytes archived (0 when there is no archive,
// no such job, or the job has not ended). Calling it again, or for a job archived
// already, changes nothing.
func (s *Jobs) ArchiveJob(ctx context.Context, id string) (int64, error) {
	if s.archive == nil {
		return 0, nil
	}
	m, err := s.r.HGetAll(ctx, s.K.Job(id)).Result()
	if err != nil {
		return 0, fmt.Errorf("state: reading job %s to archive it: %w", id, err)
	}
	return s.archiveHash(ctx, id, m)
}

// ArchiveEnded is ArchiveJob for a job ReadEnded read: its hash as read then is
// archived, not read again. A job read otherwise is read as ArchiveJob reads it.
func (s *Jobs) ArchiveEnded(ctx context.Context, j *Job) (int64, error) {
	if j.hot == nil {
		return s.ArchiveJob(ctx, j.ID)
	}
	if s.archive == nil {
		return 0, nil
	}
	return s.archiveHash(ctx, j.ID, j.hot)
}

// archiveHash archives job id, whose hash holds m.
func (s *core) archiveHash(ctx context.Context, id string, m map[string]string) (int64, error) {
	jm, chain, searches, others := splitJob(m)
	if len(jm) == 0 || jm["id"] == "" {
		return 0, nil
	}
	unstored := jm[fieldUnstored] != ""
	if v := jm[fieldCold]; v != "" {
		n, _ := strconv.ParseInt(v, 10, 64)
		if unstored {
			_, err := s.forgetAnswer(ctx, id, false)
			return 0, err
		}
		return n, nil
	}
	if !Status(jm["status"]).Terminal() {
		return 0, nil
	}
	var n int64
	if !unstored { // an unstored job archives nothing (unstored.go)
		// The stored response is JSON SaveResponse encoded; it is looked up only for a
		// job created with one ("resp" "1").
		var resp []byte
		if jm[fieldStoredResponse] == "1" {
			b, err := s.r.Get(ctx, s.K.StoredResponse(id)).Bytes()
			if err != nil && !errors.Is(err, redis.Nil) {
				return 0, fmt.Errorf("state: reading job %s's stored response to archive it: %w", id, err)
			}
			resp = b
		}
		rec := encodeCold(jm, chain, searches, resp)
		if err := s.archive.Put(ctx, id, rec); err != nil {
			return 0, fmt.Errorf("state: archiving job %s: %w", id, err)
		}
		n = int64(len(rec))
	}
	keys := []string{s.K.Job(id), s.K.StoredResponse(id)}
	left := s.Retention
	if c := FromMillis(jm["created"]); !c.IsZero() {
		left = time.Until(c.Add(s.Retention))
	}
	sum := summaryFields(summarize(jm))
	ms := s.modelSpendOfHash(jm)
	// With a single Redis the trim counts the job's spend per model (one script, one
	// round trip, exactly once); across a cluster's slots it is counted after.
	inTrim, expire := s.inOrder, false
	sp := 0
	if inTrim {
		keys = append(keys, ms.key)
		expire = s.ttls.due(ms.key, time.Now())
		sp = modelSpendArgs
	}
	argv := make([]any, 0, 4+len(sum)+sp+len(coldFields)+len(others))
	argv = append(argv, n, left.Milliseconds(), len(sum), sp)
	argv = append(argv, sum...)
	if inTrim {
		argv = append(argv, ms.args(expire)...)
	}
	if unstored {
		argv = append(argv, unstoredColdFields...)
	} else {
		argv = append(argv, coldFields...)
	}
	for _, f := range others {
		argv = append(argv, f) // the chain, the recorded results and the calls' state go with the cold fields
	}
	// One slot ({job} tag), or a single Redis: one script.
	v, err := trimJob.Run(ctx, s.r, keys, argv...).Int64Slice()
	if err != nil {
		if expire {
			s.ttls.forget(ms.key)
		}
		return 0, fmt.Errorf("state: trimming archived job %s: %w", id, err)
	}
	if len(v) == 3 && v[0] == 1 && v[2] == 0 {
		// Trimmed now, once, without counting: the job's spend per model is counted
		// here (see RecordModelSpend), from the ledger the trim dropped. A crash
		// between the two loses that job's count rather than counting it twice.
		if err := s.countModelSpend(ctx, ms, v[1]); err != nil {
			return n, err
		}
	}
	if unstored {
		_, err := s.forgetAnswer(ctx, id, false)
		return n, err
	}
	return n, nil
}

// archived reads a job's archived record: nil when there is no archive or no record.
// When expected (Redis says the job is archived), a record not found yet is looked
// for again for a moment: a replica serving the read may lag the write by a few
// milliseconds; one still missing then is an error.
func (s *core) archived(ctx context.Context, id string, expected bool) (*coldRecord, error) {
	if s.archive == nil {
		return nil, nil
	}
	for attempt := 0; ; attempt++ {
		b, err := s.archive.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("state: reading job %s's record: %w", id, err)
		}
		if b != nil {
			var rec coldRecord
			if err := json.Unmarshal(b, &rec); err != nil {
				return nil, fmt.Errorf("state: reading job %s's record: %w", id, err)
			}
			return &rec, nil
		}
		if !expected {
			return nil, nil
		}
		if attempt == 3 {
			return nil, fmt.Errorf("state: job %s's archived record is missing", id)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(20<<attempt) * time.Millisecond):
		}
	}
}
