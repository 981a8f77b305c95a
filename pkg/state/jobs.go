package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// CreateJob stores a new job record (status queued) and registers its deadline, in
// one round trip. It fails with ErrExists if the id is taken.
//
// A job whose id is fresh (Job.FreshID) and which has a deadline is written without
// the check, by plain commands in this order: its deadline, its record (HSET), the
// record's TTL (PEXPIRE), the tenant's index — 4 commands instead of a script's 6.
// Commands of one pipeline run in order on one Redis, so a writer that dies part way
// leaves a prefix of them, and none leaks:
//   - the deadline alone: the reaper finds no record at the deadline and forgets it;
//   - the deadline and a record without its TTL: at the deadline the reaper finds the
//     job queued with no terminal event and fails it (jobs.Reaper); the finisher
//     handles that ending, and its archiving (ArchiveEnded: trimJob) rewrites the
//     record with the TTL left of its retention, as it does for every ended job;
//   - all but the index: the job is not listed, which harms nothing.
//
// That second case holds only where the archive trims every ended job and the
// commands run in the order sent, so a store without an archive, or over a Redis
// Cluster (whose client sends a pipeline's commands to their nodes at once), and a
// job without a deadline, keep the script, which writes the record and its TTL
// together.
func (s *Jobs) CreateJob(ctx context.Context, j *Job) error {
	now := time.Now().UTC()
	if j.Created.IsZero() {
		j.Created = now
	}
	j.Updated = j.Created
	if j.Status == "" {
		j.Status = Queued
	}
	fields := []any{
		"id", j.ID, "tenant", j.Tenant, "kind", j.Kind, "model", j.Model, "status", string(j.Status),
		"request", []byte(j.Request), "created", Millis(j.Created), "updated", Millis(j.Updated),
		"deadline", Millis(j.Deadline), "batch", j.Batch, fieldStoredResponse, flag(j.HasStoredResponse)}
	if len(j.Callback) > 0 {
		fields = append(fields, "callback", []byte(j.Callback), "webhook", "pending")
	}
	if j.ReplayOf != "" {
		fields = append(fields, "replay_of", j.ReplayOf)
	}
	if j.Band != "" {
		fields = append(fields, "band", j.Band)
	}
	if j.Question != "" {
		fields = append(fields, "question", j.Question)
	}
	if j.Parent != "" {
		fields = append(fields, "parent", j.Parent)
	}
	if j.TraceID != "" {
		fields = append(fields, "otel_trace", j.TraceID)
	}
	if j.Unstored {
		fields = append(fields, fieldUnstored, "1")
	}
	fresh := j.FreshID && !j.Deadline.IsZero() && s.archive != nil && s.inOrder
	var created *redis.Cmd
	var index string
	err := s.pipelined(ctx, func(p redis.Pipeliner) {
		if fresh {
			// This order: see above.
			p.ZAdd(ctx, s.K.Deadlines(), redis.Z{Score: float64(j.Deadline.UnixMilli()), Member: j.ID})
			p.HSet(ctx, s.K.Job(j.ID), fields...)
			p.PExpire(ctx, s.K.Job(j.ID), s.Retention)
		} else {
			created = createJob.EvalSha(ctx, p, []string{s.K.Job(j.ID)}, append([]any{s.Retention.Milliseconds()}, fields...)...)
			if !j.Deadline.IsZero() {
				p.ZAdd(ctx, s.K.Deadlines(), redis.Z{Score: float64(j.Deadline.UnixMilli()), Member: j.ID})
			}
		}
		index = s.indexJob(ctx, p, j, now) // the tenant's recent jobs (console.go)
	})
	if err != nil {
		if index != "" {
			s.ttls.forget(index)
		}
		return fmt.Errorf("state: creating job: %w", err)
	}
	if created != nil {
		if n, _ := created.Int(); n == 0 {
			return ErrExists
		}
	}
	return nil
}

// GetJob reads a job record: from Redis, with the cold part of an ended job (its
// request, answer and trace) from the archive, or wholly from the archive when Redis
// no longer has the job (a Redis that restarted empty).
func (s *Jobs) GetJob(ctx context.Context, id string) (*Job, error) {
	vals, err := s.r.HMGet(ctx, s.K.Job(id), jobFields...).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading job: %w", err)
	}
	m := make(map[string]string, len(jobFields))
	for i, v := range vals {
		if v, ok := v.(string); ok {
			m[jobFields[i]] = v
		}
	}
	return s.jobOf(ctx, id, m)
}

// ReadEnded reads a job as GetJob does, with one HGETALL of its hash, and forgets its
// deadline (ForgetDeadline) in the same round trip: the finisher reads an ended job
// so, from its terminal event, which is out, so the reaper has nothing left to do for
// it. The job it returns carries the whole hash (its chain and recorded results too),
// which ArchiveEnded, a finish hook, archives without reading the job again.
func (s *Jobs) ReadEnded(ctx context.Context, id string) (*Job, error) {
	var hc *redis.MapStringStringCmd
	var zc *redis.IntCmd
	if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		hc = p.HGetAll(ctx, s.K.Job(id))
		zc = p.ZRem(ctx, s.K.Deadlines(), id)
		return nil
	}); err != nil {
		if hc.Err() != nil {
			return nil, fmt.Errorf("state: reading job: %w", hc.Err())
		}
		return nil, fmt.Errorf("state: forgetting a deadline: %w", zc.Err())
	}
	m := hc.Val()
	j, err := s.jobOf(ctx, id, m)
	if err == nil && m[fieldCold] == "" {
		j.hot = m
	}
	return j, err
}

// jobOf is the job whose hash holds m (the record's fields at least), with the cold
// part of an archived job from the archive, or wholly from the archive when Redis no
// longer has it.
func (s *core) jobOf(ctx context.Context, id string, m map[string]string) (*Job, error) {
	if len(m) == 0 || m["id"] == "" {
		rec, err := s.archived(ctx, id, false)
		if err != nil {
			return nil, err
		}
		if rec == nil || rec.Job["id"] == "" {
			return nil, ErrNotFound
		}
		return jobFromHash(rec.Job), nil
	}
	j := jobFromHash(m)
	if m[fieldCold] != "" && m[fieldUnstored] == "" && s.archive != nil {
		rec, err := s.archived(ctx, id, true)
		if err != nil {
			return nil, err
		}
		withCold(j, rec.Job)
	}
	return j, nil
}

// jobFields are the fields of a job's hash that make its record (jobFromHash, and
// whether it is archived): GetJob reads these, not the chain, outcomes and ledger
// that share the hash while the job runs.
var jobFields = []string{"id", "tenant", "kind", "model", "status", "request", "created", "updated", "finished", "deadline",
	"response", "usage", "trace", "callback", "batch", "webhook", "replay_of", "question", "parent", "error", fieldCold, fieldStoredResponse, "otel_trace", fieldUnstored}

// fieldStoredResponse is the job hash field that says whether the job has a stored
// response (Keys.StoredResponse): "1" or "0", written when the job is created.
const fieldStoredResponse = "resp"

func jobFromHash(m map[string]string) *Job {
	raw := func(k string) json.RawMessage {
		if v := m[k]; v != "" {
			return json.RawMessage(v)
		}
		return nil
	}
	j := &Job{
		ID: m["id"], Tenant: m["tenant"], Kind: m["kind"], Model: m["model"], Status: Status(m["status"]),
		Request: raw("request"), Created: FromMillis(m["created"]), Updated: FromMillis(m["updated"]),
		Finished: FromMillis(m["finished"]), Deadline: FromMillis(m["deadline"]),
		Response: raw("response"), Usage: raw("usage"), Trace: raw("trace"), Callback: raw("callback"),
		Batch: m["batch"], WebhookStatus: m["webhook"], ReplayOf: m["replay_of"], Question: m["question"], Parent: m["parent"],
		HasStoredResponse: m[fieldStoredResponse] == "1", Band: m["band"], TraceID: m["otel_trace"],
	}
	if e := m["error"]; e != "" {
		j.Error = &JobError{}
		if json.Unmarshal([]byte(e), j.Error) != nil {
			j.Error = &JobError{Type: "server_error", Message: e}
		}
	}
	return j
}

// JobStatus reads only a job's status (cheap: the chat worker checks it every step so
// a cancelled job makes no further paid calls).
func (s *Jobs) JobStatus(ctx context.Context, id string) (Status, error) {
	v, err := s.r.HGet(ctx, s.K.Job(id), "status").Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("state: reading status: %w", err)
	}
	return Status(v), nil
}

// setIfLive sets fields of a job unless it has ended. (lua/update_live_job.lua)
var setIfLive = script("update_live_job")

// FirstWrite is a field value Update and Finish write only where the field holds
// none: a hop's model answer (TurnField) stored with the job's ending, first write
// wins. Where it holds another value, nothing is written (ErrAnswerStood).
type FirstWrite []byte

// TurnField names hop h's stored model answer among a job's fields (for a
// FirstWrite).
func TurnField(h int) string { return hopField(prefixTurn, h) }

// ErrAnswerStood means a FirstWrite field of a job that has not ended held another
// value (another worker's answer to the hop): nothing was written.
var ErrAnswerStood = errors.New("state: another answer to the hop was stored first")

// Update sets status (if not "") and fields of a job that has not ended. It reports
// whether it wrote: false means the job had already ended (or does not exist), and the
// caller must not act as if it had moved it. Reaching a terminal status also drops the
// job's deadline.
func (s *Jobs) Update(ctx context.Context, id string, status Status, fields ...any) (bool, error) {
	n, err := setIfLive.Run(ctx, s.r, []string{s.K.Job(id)}, updateArgs(status, nil, fields)...).Int()
	if err != nil {
		return false, fmt.Errorf("state: updating job: %w", err)
	}
	if n == 2 {
		return false, ErrAnswerStood
	}
	if n == 1 && status.Terminal() {
		s.r.ZRem(ctx, s.K.Deadlines(), id)
	}
	return n == 1, nil
}

// updateArgs are setIfLive's arguments, reading back the fields read (none: nil).
func updateArgs(status Status, read []string, fields []any) []any {
	argv := make([]any, 0, 5+len(read)+len(fields))
	argv = append(argv, Millis(time.Now()), string(status), "", "", len(read))
	for _, f := range read {
		argv = append(argv, f)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		v := fields[i+1]
		switch x := v.(type) {
		case FirstWrite:
			argv[2], argv[3] = fields[i], []byte(x)
			continue
		case json.RawMessage:
			v = []byte(x)
		case *JobError:
			b, _ := json.Marshal(x)
			v = b
		case time.Time:
			v = Millis(x)
		}
		argv = append(argv, fields[i], v)
	}
	return argv
}

// Overdue returns up to n unfinished jobs whose deadline has passed.
func (s *Jobs) Overdue(ctx context.Context, now time.Time, n int64) ([]string, error) {
	return s.r.ZRangeByScore(ctx, s.K.Deadlines(), &redis.ZRangeBy{Min: "-inf", Max: Millis(now), Count: n}).Result()
}

// ForgetDeadline drops a job from the deadline set.
func (s *Jobs) ForgetDeadline(ctx context.Context, id string) error {
	return s.r.ZRem(ctx, s.K.Deadlines(), id).Err()
}

// RestoreDeadline puts a job back in the deadline set, due at at: the finisher found
// that Redis lost the ending of a job whose deadline its read forgot (ReadEnded), and
// the reaper is to repair the job if the finisher cannot.
func (s *Jobs) RestoreDeadline(ctx context.Context, id string, at time.Time) error {
	return s.r.ZAdd(ctx, s.K.Deadlines(), redis.Z{Score: float64(at.UnixMilli()), Member: id}).Err()
}

// tryLock takes a short named lock (the reaper's), reporting whether it got it.
