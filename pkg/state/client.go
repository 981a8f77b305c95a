package state

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// Client is a connection to Redis. Wiring code holds one to hand to New; only this
// package sends it commands.
type Client = redis.UniversalClient

// Dial connects to the Redis at url (redis://…) and waits until it answers, retrying
// for at most wait (0: one attempt) or until ctx ends.
func Dial(ctx context.Context, url string, wait time.Duration) (Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	opt.PoolSize = 256
	rdb := redis.NewClient(opt)
	deadline := time.Now().Add(wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, min(2*time.Second, max(wait, 500*time.Millisecond)))
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return rdb, nil
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			rdb.Close()
			return nil, fmt.Errorf("redis %s not reachable: %w", redact.URL(url), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Persist runs write until it succeeds, backing off from 100 ms, for at most within
// (or until ctx ends). It is for the writes that record something already paid for (a
// model's answer, a search result): worth riding out a Redis restart, because the
// redelivery that would follow a failure would pay again.
func Persist(ctx context.Context, within time.Duration, write func() error) error {
	policy := backoff.NewExponentialBackOff()
	policy.InitialInterval, policy.MaxElapsedTime = 100*time.Millisecond, within
	return backoff.Retry(write, backoff.WithContext(policy, ctx))
}
