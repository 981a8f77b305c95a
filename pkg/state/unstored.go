package state

import (
	"context"
	"fmt"
	"time"
)

// A job created with store: false (Job.Unstored) keeps nothing beyond its summary
// once it has ended and been answered. Its end archives nothing: the trim that
// archives other jobs drops its request, trace, chain and recorded searches at once
// and keeps its answer (response, usage) only until the ingress that waits for it
// has read it. The answer goes when both have happened — the trim and the answer,
// in either order (ForgetAnswer) — so what stays for the retention period is the
// short record with its summary (question, searches and cost, error), as listings
// show it, about a kilobyte.

// fieldUnstored is the job hash field of a job created with store: false ("1").
const fieldUnstored = "nostore"

// forgetAnswerScript drops an unstored job's answer once it is both trimmed and
// answered. (lua/forget_answer.lua)
var forgetAnswerScript = script("forget_answer")

// ForgetAnswer notes that an unstored job's answer has reached its client, and drops
// the answer if the job's end has been trimmed already (else the trim drops it). It
// reports whether this call dropped it: the job's footprint shrank.
func (s *Jobs) ForgetAnswer(ctx context.Context, id string) (bool, error) {
	return s.forgetAnswer(ctx, id, true)
}

func (s *core) forgetAnswer(ctx context.Context, id string, answered bool) (bool, error) {
	flag := "0"
	if answered {
		flag = "1"
	}
	n, err := forgetAnswerScript.Run(ctx, s.r, []string{s.K.Job(id)}, flag).Int()
	if err != nil {
		return false, fmt.Errorf("state: forgetting job %s's answer: %w", id, err)
	}
	return n > 0, nil
}

// trimUnstored is ArchiveJob for an ended unstored job, whose hash holds m: nothing
// is archived; Redis keeps the short record, its summary and, until it is answered,
// its answer.
func (s *core) trimUnstored(ctx context.Context, id string, m map[string]string, others []string) error {
	left := s.Retention
	if c := FromMillis(m["created"]); !c.IsZero() {
		left = time.Until(c.Add(s.Retention))
	}
	sum := summaryFields(summarize(m))
	argv := make([]any, 0, 4+len(sum)+len(coldFields)+len(others))
	argv = append(argv, 0, left.Milliseconds(), len(sum), 0)
	argv = append(argv, sum...)
	for _, f := range coldFields {
		if f != "response" && f != "usage" {
			argv = append(argv, f)
		}
	}
	for _, f := range others {
		argv = append(argv, f)
	}
	if err := trimJob.Run(ctx, s.r, []string{s.K.Job(id), s.K.StoredResponse(id)}, argv...).Err(); err != nil {
		return fmt.Errorf("state: trimming unstored job %s: %w", id, err)
	}
	_, err := s.forgetAnswer(ctx, id, false)
	return err
}
