package state

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// settle overwrites a job's status with a terminal one (the event stream's record of
// how the job ended), keeping its other fields. (lua/settle_status.lua)
var settle = script("settle_status")

// Settle makes a job's status the terminal status the event stream recorded for it:
// the one write that may overwrite a terminal status, for a Redis that lost the first
// ending (see jobs.End). A job whose record is gone stays gone.
func (s *Jobs) Settle(ctx context.Context, id string, status Status, je *JobError) error {
	if !status.Terminal() {
		return fmt.Errorf("state: settling %s to %s: not a terminal status", id, status)
	}
	errJSON := ""
	if je != nil {
		b, _ := json.Marshal(je)
		errJSON = string(b)
	}
	if err := settle.Run(ctx, s.r, []string{s.K.Job(id)}, Millis(time.Now()), string(status), errJSON).Err(); err != nil {
		return fmt.Errorf("state: settling job: %w", err)
	}
	return nil
}

// DeleteJob removes a job that was recorded but never accepted (its publish failed
// and no Idempotency-Key can complete it), with its deadline.
func (s *Jobs) DeleteJob(ctx context.Context, id string) error {
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.K.Job(id), s.K.WebhookSecret(id))
		p.ZRem(ctx, s.K.Deadlines(), id)
		return nil
	})
	return err
}
