package state

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// A synchronous request is answered by the ingress that took it, once its job ends.
// Rather than read the ended job back from Redis (an HMGET of its record, request
// included, on the critical path of every such job), the ingress can be handed the
// job by the write that ended it: the job names its ingress (Job.Ingress), the end
// script reads the record's other fields with the status it compares, and the ender
// sends what the script read and wrote (Ended) to that ingress. Redis stays the
// source of truth: an ingress that is not handed the job reads it as before.

// fieldIngress is the job hash field naming the ingress that waits for the job
// (Job.Ingress).
const fieldIngress = "ingress"

// Ended is a job as the write that ended it left it (FinishRecord): what GetJob would
// read right after, for the ingress waiting for it and for the copy a terminal event
// carries of a job with a callback (jobs.End).
type Ended struct {
	// Ingress is the waiting ingress (Job.Ingress; "" when none waits and the record
	// was read for the job's callback).
	Ingress string
	// hash is the job's record (jobFields) after the write.
	hash map[string]string
}

// Job is the ended job, decoded as GetJob decodes its hash.
func (e *Ended) Job() *Job { return jobFromHash(e.hash) }

// endedVersion opens an encoded Ended (Record): a record in another layout is not
// decoded (EndedJob fails) and its ingress reads the job from Redis.
const endedVersion = 1

// Record encodes the job for the ingress: a version byte, then each field and its
// value, each as a uvarint length and its bytes (no escaping of the request's and
// answer's JSON).
func (e *Ended) Record() []byte {
	n := 1
	for k, v := range e.hash {
		n += 2*binary.MaxVarintLen32 + len(k) + len(v)
	}
	b := make([]byte, 1, n)
	b[0] = endedVersion
	for _, k := range jobFields {
		v, ok := e.hash[k]
		if !ok {
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

var errEndedRecord = errors.New("state: unreadable ended-job record")

// EndedJob decodes a record of Ended.Record into the job, through the decoding GetJob
// uses (jobFromHash), so what it returns is what GetJob would have read.
func EndedJob(b []byte) (*Job, error) {
	if len(b) == 0 || b[0] != endedVersion {
		return nil, errEndedRecord
	}
	m := make(map[string]string, len(jobFields))
	field := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return "", false
		}
		v := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return v, true
	}
	for b = b[1:]; len(b) > 0; {
		k, ok := field()
		v, ok2 := field()
		if !ok || !ok2 {
			return nil, errEndedRecord
		}
		m[k] = v
	}
	if m["id"] == "" || m[fieldCold] != "" {
		return nil, errEndedRecord // GetJob would read the archive for it
	}
	return jobFromHash(m), nil
}

// FinishRecord is Finish that also returns, when this write moved the job and the
// job names an ingress (Job.Ingress) or has a callback, the job as the write left it:
// the record's fields as the script's one HMGET read them beside the status, with the
// fields it wrote over them. request is the job's request as the caller read it (the
// chat worker holds it), so Redis need not send it back; nil has the script read it
// too. Without an ingress or a callback the reply is Finish's.
func (s *Jobs) FinishRecord(ctx context.Context, id string, status Status, request json.RawMessage, fields ...any) (bool, *Ended, error) {
	// The first two fields read are the ones that ask for the record
	// (lua/update_live_job.lua).
	read := make([]string, 0, len(jobFields)+1)
	read = append(read, fieldIngress, "callback")
	for _, f := range jobFields {
		if f != "callback" && (f != "request" || request == nil) {
			read = append(read, f)
		}
	}
	return s.finish(ctx, id, status, read, request, fields)
}

// finish runs setIfLive to end a job, reading back the fields read (FinishRecord).
func (s *core) finish(ctx context.Context, id string, status Status, read []string, request json.RawMessage, fields []any) (bool, *Ended, error) {
	if !status.Terminal() {
		return false, nil, fmt.Errorf("state: finishing %s as %q: not a terminal status", id, status)
	}
	argv := updateArgs(status, read, fields)
	v, err := setIfLive.Run(ctx, s.r, []string{s.K.Job(id)}, argv...).Result()
	if err != nil {
		return false, nil, fmt.Errorf("state: finishing job: %w", err)
	}
	var vals []any
	switch x := v.(type) {
	case int64:
		if x == 2 {
			return false, nil, ErrAnswerStood
		}
		return x == 1, nil, nil
	case []any:
		if len(x) != 1+len(read) {
			return true, nil, nil // moved; nothing to hand over
		}
		vals = x[1:]
	default:
		return false, nil, fmt.Errorf("state: finishing job: unexpected reply %T", v)
	}
	// The record after the write: the fields read, with what the script wrote over
	// them (updated, status, finished, then the pairs).
	m := make(map[string]string, len(jobFields))
	for i, f := range read[1:] {
		if s, ok := vals[i+1].(string); ok {
			m[f] = s
		}
	}
	if request != nil {
		m["request"] = string(request)
	}
	now := argv[0].(string)
	m["updated"], m["status"], m["finished"] = now, string(status), now
	for i := 5 + len(read); i+1 < len(argv); i += 2 {
		f, _ := argv[i].(string)
		if !slices.Contains(jobFields, f) {
			continue
		}
		switch x := argv[i+1].(type) {
		case string:
			m[f] = x
		case []byte:
			m[f] = string(x)
		default:
			return true, nil, nil // a value only Redis knows the text of: not handed over
		}
	}
	ingress, _ := vals[0].(string)
	return true, &Ended{Ingress: ingress, hash: m}, nil
}
