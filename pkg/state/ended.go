package state

import (
	"context"
	"fmt"
	"slices"
)

// Ended is a job as the write that ended it left it (FinishRecord): what GetJob would
// read right after, request aside, for the copy a terminal event carries of a job
// with a callback (jobs.End).
type Ended struct {
	// hash is the job's record (jobFields) after the write.
	hash map[string]string
}

// Job is the ended job, decoded as GetJob decodes its hash.
func (e *Ended) Job() *Job { return jobFromHash(e.hash) }

// FinishRecord is Finish that also returns, when this write moved the job and the
// job has a callback, the job as the write left it but for its request: the record's
// fields as the script's one HMGET read them beside the status, with the fields it
// wrote over them. Without a callback the reply is Finish's.
func (s *Jobs) FinishRecord(ctx context.Context, id string, status Status, fields ...any) (bool, *Ended, error) {
	// The first field read is the one that asks for the record
	// (lua/update_live_job.lua).
	read := make([]string, 0, len(jobFields))
	read = append(read, "callback")
	for _, f := range jobFields {
		if f != "callback" && f != "request" {
			read = append(read, f)
		}
	}
	return s.finish(ctx, id, status, read, fields)
}

// finish runs setIfLive to end a job, reading back the fields read (FinishRecord).
func (s *core) finish(ctx context.Context, id string, status Status, read []string, fields []any) (bool, *Ended, error) {
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
	for i, f := range read {
		if s, ok := vals[i].(string); ok {
			m[f] = s
		}
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
	return true, &Ended{hash: m}, nil
}
