package state

import (
	"context"
	"fmt"
)

// A job created with store: false (Job.Unstored) keeps nothing beyond its summary
// once it has ended and been answered. Its end archives nothing: the trim that
// archives other jobs (counting its spend per model alike) drops its request, trace,
// chain and recorded searches at once and keeps its answer (response, usage, error)
// only until the ingress that waits for it has read it. The answer goes when both
// have happened — the trim and the answer, in either order (ForgetAnswer) — so what
// stays for the retention period is the short record with its summary (question,
// searches and cost, error), as listings show it, about a kilobyte. An ingress that
// dies before it answers leaves the answer in Redis until the record expires.

// fieldUnstored is the job hash field of a job created with store: false ("1").
const fieldUnstored = "nostore"

// unstoredColdFields are the fields an unstored job's trim drops: coldFields but its
// answer (response, usage, error), which ForgetAnswer drops once it is answered.
var unstoredColdFields = []any{"request", "trace", "callback", "question"}

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
