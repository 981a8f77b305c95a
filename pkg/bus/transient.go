package bus

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// setupWithin bounds how long a process retries creating its streams and consumers
// while the JetStream cluster is not answering (a node died, a leader is being
// elected): a failover takes seconds; longer than this, the process exits and its
// supervisor restarts it.
const setupWithin = 60 * time.Second

// retryTransient runs op until it succeeds, fails for a reason a retry cannot change
// (a JetStream API error below 500: a bad configuration), or setupWithin passes. Each
// attempt gets its own request timeout.
func retryTransient(ctx context.Context, op func(ctx context.Context) error) error {
	policy := backoff.NewExponentialBackOff()
	policy.InitialInterval, policy.MaxInterval, policy.MaxElapsedTime = 200*time.Millisecond, 3*time.Second, setupWithin
	return backoff.Retry(func() error {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := op(actx)
		if err != nil && (!transient(err) || ctx.Err() != nil) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(policy, ctx))
}

// transient reports whether a JetStream request may succeed if made again: it timed
// out, nobody answered, or the server answered that the cluster cannot serve it now.
func transient(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.Code >= 500
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting)
}
